"""The scrape keeps one connection per exporter from one refresh to the next, so that over HTTPS a fleet pays its
TLS handshakes once, not at every refresh. Before, the adapter's pool dropped a connection idle for 15 s
(aiohttp's default), the default refresh interval: a pod scraped a little later in its refresh than in the last
was met with a new connection and a full handshake, every refresh; at 10,000 pods seconds of CPU each time, on
both sides (bench/bench_scrape_tls.py).

Real parts: the adapter's scrape source with its client certificate and --exporter-server-name, exporters
serving over the exporter's own TLS (`serve_over_tls`: its certificate and --tls-client-ca-file) on real sockets,
which count the connections they accept. Time between refreshes is not waited for: the pool's clock
(aiohttp's, which it reads to age idle connections) is stepped by the refresh interval instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import trustme
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.settings import REFRESH_INTERVAL_RANGE_S
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from autoscaler.sources.scrape_keepalive import CLOSE_BEFORE_EXPORTER_S, scrape_keepalive_s
from autoscaler.sources.scrape_tls import exporter_client_tls
from bench.fake_exporter import NAMESPACE, bench_pod, exporter_text
from exporter.listen import KEEPALIVE_TIMEOUT_S
from exporter.metrics_tls import serve_over_tls
from exporter.settings import ExporterSettings
from tests.sources.static_discovery import StaticDiscovery
from tests.support.certificates import issue_cert
from tests.support.clock import SteppedClock

KEY = RuntimeKey(NAMESPACE, "modelmesh-serving-triton")
SERVER_NAME = "exporter.ml.svc"
PODS = 3
REFRESH_INTERVAL_S = 15.0
"""The adapter's default --refresh-interval, which `build_source` gives the scrape as its deadline."""


class Fleet:
    """Exporters over TLS, each on its own port (a pod of its own to the adapter's pool), counting the
    connections they accept."""

    def __init__(self, pki: Path) -> None:
        self.pki = pki
        self.accepted: set[asyncio.BaseTransport] = set()  # held, so that no later connection shares an id
        self.urls: list[str] = []

    async def start(self, aiohttp_server: AiohttpServer, pod: int) -> None:
        body = exporter_text(pod, gpus=1, modelmesh_stamp=1_700_000_000.0)

        async def metrics(request: web.Request) -> web.Response:
            assert request.transport is not None
            self.accepted.add(request.transport)
            return web.Response(body=body, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        settings = replace(ExporterSettings(), tls_cert_file=self.pki / "tls.crt", tls_key_file=self.pki / "tls.key",
                           tls_client_ca_file=self.pki / "ca.pem")
        server = await aiohttp_server(app, ssl=serve_over_tls(app, settings), keepalive_timeout=KEEPALIVE_TIMEOUT_S)
        self.urls.append(f"https://127.0.0.1:{server.port}/metrics")


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    serving = issue_cert(authority, SERVER_NAME)
    serving.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "tls.crt"))
    serving.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    client = issue_cert(authority, "modelmesh-autoscaler")
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.crt"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    return tmp_path


@pytest.fixture
def pool_clock(monkeypatch: pytest.MonkeyPatch) -> SteppedClock:
    """The clock aiohttp's connection pool ages idle connections by."""
    clock = SteppedClock()
    monkeypatch.setattr("aiohttp.connector.monotonic", clock)
    return clock


def scrape_source(fleet: Fleet, refresh_interval_s: float) -> ScrapeSource:
    pods = tuple(PodTarget(bench_pod(pod).name or "", True, url, uid=bench_pod(pod).uid)
                 for pod, url in enumerate(fleet.urls))
    tls = exporter_client_tls(fleet.pki / "ca.pem", fleet.pki / "client.crt", fleet.pki / "client.key")
    return ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, pods)]), deadline_s=refresh_interval_s,
                        ssl_context=tls.context, server_name=SERVER_NAME, client_certificate=tls.client_certificate)


@pytest.mark.parametrize("later_s", [0.5, REFRESH_INTERVAL_S - 0.5])
async def test_refreshes_reuse_one_connection_per_exporter(
    aiohttp_server: AiohttpServer, pki: Path, pool_clock: SteppedClock, later_s: float
) -> None:
    """`later_s`: how much later in its refresh each pod is scraped than in the last one (a refresh may take up
    to its deadline, the refresh interval)."""
    fleet = Fleet(pki)
    for pod in range(PODS):
        await fleet.start(aiohttp_server, pod)
    source = scrape_source(fleet, REFRESH_INTERVAL_S)
    try:
        for refresh in range(4):
            [snapshot] = await source.collect(1_700_000_000.0 + refresh * REFRESH_INTERVAL_S)
            assert all(pod.sampled_at is not None for pod in snapshot.pods), source.problems(KEY)
            pool_clock.advance(REFRESH_INTERVAL_S + later_s)
    finally:
        await source.close()
    accepted = len(fleet.accepted)
    assert accepted == PODS, f"{accepted} connections (TLS handshakes) over 4 refreshes of {PODS} exporters"


@given(interval=st.floats(*REFRESH_INTERVAL_RANGE_S), later=st.floats(0.0, 1.0))
def test_a_connection_outlives_the_exporters_idle_time_never_the_exporters_own_keepalive(
    interval: float, later: float
) -> None:
    """A pod's connection idles one refresh interval, plus up to one more when the pod was scraped first in one
    refresh and last in the next (each ends by its deadline, the interval): kept that long wherever the exporter
    keeps it too, and always dropped by the adapter before the exporter drops it, so that no scrape is sent on a
    connection the exporter is closing."""
    keepalive = scrape_keepalive_s(interval)
    idle = interval * (1 + later)
    assert keepalive < KEEPALIVE_TIMEOUT_S
    if idle <= KEEPALIVE_TIMEOUT_S - CLOSE_BEFORE_EXPORTER_S:
        assert idle <= keepalive
