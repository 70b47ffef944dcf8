"""A secured API on a real TLS port, backed by the shared fake Kubernetes API."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from autoscaler.api.app import build_api_app, install_dispatch
from autoscaler.api.auth import ApiSecurity, build_api_security
from autoscaler.api.connection_room import ConnectionGuard
from autoscaler.api.connections import ConnectionLimits, GuardedSite
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki, refresher_with, runtime_view
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import write_kubeconfig


@pytest.fixture(scope="session")
def pki() -> Pki:
    return Pki()


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as fake:
        yield fake


@dataclass
class SecuredApi:
    """The adapter's API behind its real gate; `get` speaks TLS with an optional client certificate."""

    url: str
    pki: Pki
    kube: FakeKubeApi
    metrics: AdapterMetrics
    refresher: Refresher
    security: ApiSecurity
    port: int
    guard: ConnectionGuard
    """The listener's connection guard: what it refused, evicted, holds in line."""
    _contexts: dict[int, ssl.SSLContext] = field(default_factory=dict)

    def context(self, leaf: trustme.LeafCert | None) -> ssl.SSLContext:
        key = id(leaf)
        if key not in self._contexts:
            self._contexts[key] = self.pki.client_context(leaf)
        return self._contexts[key]

    async def get(self, path: str, *, cert: trustme.LeafCert | None = None, headers: dict[str, str] | None = None,
                  token: str | None = None, local_address: str | None = None) -> tuple[int, Any]:
        """`local_address`: the client's source address (any of 127/8 on Linux), to be another peer."""
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        connector = aiohttp.TCPConnector(ssl=self.context(cert),
                                         local_addr=(local_address, 0) if local_address is not None else None)
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get(self.url + path, headers=all_headers) as response:
            body = await response.read()
            try:
                return response.status, json.loads(body)
            except ValueError:
                return response.status, body.decode()


@pytest.fixture
def settings_for(pki: Pki, tmp_path: Path, kube: FakeKubeApi) -> Callable[..., ServeSettings]:
    def make(*, files: bool = True, **overrides: Any) -> ServeSettings:
        requestheader, client = pki.write_cas(tmp_path)
        base: dict[str, Any] = {"kubeconfig": kube.write_kubeconfig(tmp_path / "kubeconfig"),
                                "requestheader_allowed_names": ("front-proxy-client",)}
        if files:
            base.update(requestheader_client_ca_file=requestheader, client_ca_file=client)
        return ServeSettings(**{**base, **overrides})

    return make


@asynccontextmanager
async def guarded_site(app: web.Application, tls: ssl.SSLContext, limits: ConnectionLimits | None = None, *,
                       dispatch: bool = False) -> AsyncIterator[GuardedSite]:
    """`app` served as `serve` serves it, through the guarded listener and its protocol (which keeps what
    authentication found out about a connection), on a free port of 127.0.0.1; the started site (its `port`,
    its `guard`). `dispatch`: with the serving worker's fast dispatch installed (`install_dispatch`), as a
    worker serves."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if dispatch:
        assert runner.server is not None
        install_dispatch(app, runner.server)
    site = GuardedSite(runner, "127.0.0.1", 0, tls=tls, limits=limits or ConnectionLimits())
    try:
        await site.start()
        assert site.guard is not None
        yield site
    finally:
        await runner.cleanup()


@asynccontextmanager
async def listening(app: web.Application, tls: ssl.SSLContext,
                    limits: ConnectionLimits | None = None, *, dispatch: bool = False) -> AsyncIterator[int]:
    """`guarded_site`'s port."""
    async with guarded_site(app, tls, limits, dispatch=dispatch) as site:
        yield site.port


@asynccontextmanager
async def secured_api(pki: Pki, kube: FakeKubeApi, settings: ServeSettings, *, kube_timeout_s: float = 2.0,
                      clock: Callable[[], float] | None = None,
                      limits: ConnectionLimits | None = None) -> AsyncIterator[SecuredApi]:
    """The API with one runtime behind its real gate (`build_api_security` against `kube`), on a TLS port
    behind the guarded listener (`limits`: its connection limits, else the defaults).
    `kube_timeout_s`: long where a test holds reviews in flight; by default 2 s, shorter than the shipped 10 s
    (`reviews.DEFAULT_TIMEOUT_S`) so that a review failing on every try ends soon, yet not 0.5 s: then a review
    the fake answered at once timed out on a loaded 2-core machine, a second warning in a test of one;
    `clock`: what certificate dates are checked against."""
    metrics = AdapterMetrics()
    refresher = refresher_with(runtime_view(KEY), metrics=metrics)
    tls = pki.server_context()
    security = await build_api_security(settings, tls, metrics, kube_timeout_s=kube_timeout_s,
                                        clock=clock if clock is not None else time.time)
    try:
        async with guarded_site(build_api_app(refresher, metrics, security.gate), tls, limits) as site:
            assert site.guard is not None
            yield SecuredApi(f"https://127.0.0.1:{site.port}", pki, kube, metrics, refresher, security,
                             site.port, site.guard)
    finally:
        await security.close()


@pytest.fixture
async def secured(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
) -> AsyncIterator[SecuredApi]:
    async with secured_api(pki, kube, settings_for()) as api:
        yield api


@pytest.fixture
def metric_path() -> Iterator[Callable[..., str]]:
    def make(metric: str = "modelmesh_desired_replicas", namespace: str = KEY.namespace,
             deployment: str = KEY.deployment) -> str:
        return (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
                f"?labelSelector=deployment%3D{deployment}")

    yield make


@pytest.fixture(params=["routed", "dispatched"])
async def raw_api_port(request: pytest.FixtureRequest, pki: Pki) -> AsyncIterator[int]:
    """One runtime's API on a guarded TLS port, through aiohttp's routing or the serving worker's fast dispatch:
    where raw requests (`raw_http.exchange`) check what aiohttp's parser and the guard answer before a handler."""
    refresher = refresher_with(runtime_view(KEY))
    app = build_api_app(refresher, refresher.metrics)
    async with listening(app, pki.server_context(), dispatch=request.param == "dispatched") as bound:
        yield bound


@pytest.fixture
async def kubeconfig(pki: Pki, tmp_path: Path) -> AsyncIterator[Path]:
    """A kubeconfig for the real kubectl, at an API without authentication serving one runtime (`KEY`) over TLS."""
    refresher = refresher_with(runtime_view(KEY))
    async with listening(build_api_app(refresher, refresher.metrics), pki.server_context()) as port:
        yield write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
