"""What the API tests (and `bench/bench_api.py`) build: certificates made with trustme, runtime views made by
the real decision code, a refresher holding them, and TLS contexts for both ends."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import MetricSource, SourceDefaults
from tests.support.certificates import issue_cert

NOW = 1_700_000_000.0
NAMESPACE = "ml"
DEPLOYMENT = "modelmesh-serving-triton"
KEY = RuntimeKey(NAMESPACE, DEPLOYMENT)
PROXY_CN = "front-proxy-client"


class StaticSource(SourceDefaults):
    """A metric source that is never asked: the tests set the refresher's views directly."""

    name = "static"
    errors: dict[str, int] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return []

    async def close(self) -> None:
        return None


def runtime_view(key: RuntimeKey = KEY, *, fresh: bool = True, now: float = NOW) -> RuntimeView:
    """A view made by `decide` from three skewed pods: known when `fresh`, unknown (503) otherwise."""
    age = 5.0 if fresh else 3600.0
    pods = tuple(
        PodSample(name=f"{key.deployment}-{i}", ready=True, sampled_at=now - age, gpu_busy=busy,
                  requests_per_second=rps, queue_delay_s=0.0, lru_age_s=900.0, cache_used_ratio=0.5,
                  models_loaded=4.0)
        for i, (busy, rps) in enumerate([(0.95, 120.0), (0.4, 30.0), (0.05, 2.0)])
    )
    snapshot = RuntimeSnapshot(key=key, pods=pods, taken_at=now, replicas=len(pods))
    view, _ = decide(snapshot, RuntimePolicy(), None, now, 30.0)
    return view


def refresher_with(*views: RuntimeView, metrics: AdapterMetrics | None = None, ready: bool = True) -> Refresher:
    refresher = Refresher(StaticSource(), PolicyBook(), metrics or AdapterMetrics())
    refresher.views = {view.key: view for view in views}
    refresher.refreshes = 1 if ready else 0
    return refresher


async def served_source(source: MetricSource, clock: Callable[[], float],
                        aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]]
                        ) -> tuple[Refresher, TestClient[Any, Any]]:
    """`source` refreshed on `clock` (its wall and monotonic time alike) by the built-in policy, and a client of
    the API serving it: what a test of what /debug says of a source's answers refreshes and reads."""
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=clock, monotonic=clock)
    return refresher, await aiohttp_client(build_api_app(refresher, refresher.metrics))


@dataclass
class Pki:
    """Every certificate the security tests need, from four independent CAs."""

    server_ca: trustme.CA = field(default_factory=trustme.CA)
    front_proxy_ca: trustme.CA = field(default_factory=trustme.CA)
    client_ca: trustme.CA = field(default_factory=trustme.CA)
    other_ca: trustme.CA = field(default_factory=trustme.CA)

    def __post_init__(self) -> None:
        self.server = issue_cert(self.server_ca, "127.0.0.1", "localhost")
        self.proxy = issue_cert(self.front_proxy_ca, common_name=PROXY_CN)
        self.rogue_proxy = issue_cert(self.front_proxy_ca, common_name="not-the-aggregator")
        self.alice = issue_cert(self.client_ca, common_name="alice", organization_name="analysts")
        self.stranger = issue_cert(self.other_ca, common_name=PROXY_CN)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.server.configure_cert(context)
        return context

    def client_context(self, leaf: trustme.LeafCert | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.server_ca.configure_trust(context)
        if leaf is not None:
            leaf.configure_cert(context)
        return context

    def write_cas(self, directory: Path) -> tuple[Path, Path]:
        """(requestheader CA file, client CA file)."""
        requestheader, client = directory / "front-proxy-ca.crt", directory / "client-ca.crt"
        requestheader.write_bytes(self.front_proxy_ca.cert_pem.bytes())
        client.write_bytes(self.client_ca.cert_pem.bytes())
        return requestheader, client
