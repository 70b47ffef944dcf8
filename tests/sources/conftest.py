"""Fixtures of the sources' tests: a real Prometheus on backfilled samples, the test's clock, and the fake Kubernetes
API with a client of it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.sources.prometheus import PrometheusSource
from tests.fakes.kube import FakeKubeApi
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text

StartPrometheus = Callable[[Iterable[Sample]], Awaitable[PrometheusServer]]


@pytest.fixture
def now() -> float:
    """The test's wall clock, read when it starts: backfilled data must be recent at query time."""
    return time.time()


@pytest.fixture
async def start_prometheus(tmp_path: Path) -> AsyncIterator[StartPrometheus]:
    """Backfill samples into a fresh TSDB and start a Prometheus on it; all are stopped at the end."""
    servers: list[PrometheusServer] = []

    async def start(samples: Iterable[Sample]) -> PrometheusServer:
        workdir = tmp_path / f"prometheus-{len(servers)}"
        tsdb = create_blocks(openmetrics_text(samples), workdir / "tsdb")
        server = PrometheusServer(tsdb_dir=tsdb, workdir=workdir)
        servers.append(server)
        await server.start()
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def sources() -> AsyncIterator[list[PrometheusSource]]:
    """The Prometheus sources a test made (appended to the list), closed after it."""
    made: list[PrometheusSource] = []
    yield made
    for source in made:
        await source.close()



@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeKubeApi, ApiClient]]:
    """The fake Kubernetes API and a client of it (the Deployment resync's tests), closed after the test."""
    async with FakeKubeApi() as kube:
        settings = Configuration()
        settings.host = kube.url
        client = ApiClient(settings)
        yield kube, client
        await client.close()  # type: ignore[no-untyped-call]
