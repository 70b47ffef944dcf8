"""A pod watch whose stream is dropped mid-way (a proxy cutting long-lived streams, one API server instance of
several restarting) and resumed at once from the resourceVersion it reached loses nothing: the reopen replays what
happened meanwhile, as client-go's reflector counts on (it never marks its store stale for that). Pod discovery is
out of date only when events may have been missed or may not arrive: a watch that cannot be reopened (refused,
the API server unreachable), a list that fails, or a dropped watch still down past `watch_ends.DROPPED_GRACE_S`.

Before, every dropped stream made every runtime of the watched scope answer 503 "pod discovery out of date" from
the drop until the reopen landed: a refresh falling in between (5 of 10 drops in a soak at `--refresh-interval 1`)
served the whole cluster's HPAs 503 for one refresh, every pod fresh and the inventory current.

Real parts: the fake Kubernetes API (its streams dropped with `end_watches(abort=True)`, the reopen held with
`hold_answer`, so the refresh lands between the drop and the reopen, not by racing it), pod discovery, the scrape
source, the refresher and the external metrics API read over HTTP; an exporter on a real socket.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from kubernetes.aio.client import Configuration
from pytest_aiohttp import AiohttpServer

from autoscaler.api.app import build_api_app
from autoscaler.kube import watch_ends
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.faults import HeldAnswer
from tests.support.fresh_exporter import exporter_port
from tests.support.waiting import eventually
from tests.support.watch_bars import watches_judged

NS = "modelmesh-serving"
KEY = RuntimeKey(NS, "modelmesh-serving-triton")
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
          f"?labelSelector=deployment={KEY.deployment}")
PODS_PATHS = {"namespace": rf"^/api/v1/namespaces/{NS}/pods$", "all namespaces": r"^/api/v1/pods$"}
"""The pod watch's path: of the namespace (`--namespaces`), or of all namespaces (the soak's)."""
ClientFactory = Callable[..., Awaitable[TestClient[Any, Any]]]


@dataclass
class Adapter:
    """The adapter's parts over the fake API: discovery, the refresher, and a client of its HTTP API."""

    kube: FakeKubeApi
    discovery: KubePodDiscovery
    refresher: Refresher
    client: TestClient[Any, Any]
    pods_path: str

    def pod_watch_failures(self) -> float:
        """The pod watch's failures so far, all causes (`modelmesh_autoscaler_watch_failures_total`)."""
        registry = self.refresher.metrics.registry
        return sum(sample.value for metric in registry.collect() for sample in metric.samples
                   if sample.name == "modelmesh_autoscaler_watch_failures_total"
                   and sample.labels.get("watch") == "pods")

    def pod_watch_open(self) -> bool:
        """Whether the pod watch is open to the adapter (`modelmesh_autoscaler_watch_established`): its answer read,
        not only open at the fake (a cut before then breaks the request, not a watch)."""
        registry = self.refresher.metrics.registry
        return any(sample.value == 1.0 for metric in registry.collect() for sample in metric.samples
                   if sample.name == "modelmesh_autoscaler_watch_established" and sample.labels.get("watch") == "pods")

    async def answer(self) -> tuple[int, str]:
        """Refresh once, then read the runtime's value as the HPA does: the status and the body."""
        await self.refresher.refresh_once()
        async with self.client.get(METRIC) as response:
            return response.status, await response.text()

    async def dropped_and_held(self) -> HeldAnswer:
        """Drop the pod watch's stream mid-way and hold its reopen unanswered; return once the adapter has told the
        drop (counted in its metrics) and sent the reopen: the watch is down, nothing has been missed."""
        failures = self.pod_watch_failures()
        await self.kube.wait_for_watches(1, "pods")
        await eventually(self.pod_watch_open)
        held = self.kube.hold_answer(self.pods_path, method="GET")
        self.kube.end_watches(abort=True)
        await eventually(lambda: self.pod_watch_failures() > failures and held.hits == 1)
        return held

    async def reopened(self, held: HeldAnswer) -> None:
        """Let the held reopen through; return once the watch is open again."""
        held.release()
        await self.kube.wait_for_watches(1, "pods")
        await eventually(lambda: self.pod_watch_open() and self.discovery.healthy)


@pytest.fixture(params=sorted(PODS_PATHS))
async def adapter(aiohttp_server: AiohttpServer, aiohttp_client: ClientFactory, monkeypatch: pytest.MonkeyPatch,
                  request: pytest.FixtureRequest) -> AsyncIterator[Adapter]:
    """A runtime of one Ready pod whose exporter answers, served (200). Each pod watch counts as one that worked
    and stayed open however soon it is dropped (`watches_judged`): in the soak, streams were dropped after 45 s
    open; a test that waited that long (or `STAYED_OPEN_S`) per drop would wait on the clock, not on the story."""
    with watches_judged(monkeypatch, works_after_s=0.0, stays_open_after_s=0.0):
        async with FakeKubeApi() as kube:
            for name in kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=1):
                kube.set_pod_ip(NS, name, "127.0.0.1")
            settings = Configuration()
            settings.host = kube.url
            metrics = AdapterMetrics()
            namespaces = [NS] if request.param == "namespace" else None
            discovery = KubePodDiscovery(settings, discover=True, namespaces=namespaces, resync_interval_s=3600.0,
                                         request_timeout_s=2.0, backoff_initial_s=0.02, backoff_max_s=0.1,
                                         exporter_port=await exporter_port(aiohttp_server), health=metrics)
            source = ScrapeSource(discovery)
            refresher = Refresher(source, PolicyBook(), metrics)
            client = await aiohttp_client(build_api_app(refresher, metrics))
            await discovery.start()
            try:
                await eventually(lambda: KEY in discovery.inventory() and len(discovery.inventory()[KEY].pods) == 1)
                await kube.wait_for_watches(1, "pods")
                subject = Adapter(kube, discovery, refresher, client, PODS_PATHS[request.param])
                status, body = await subject.answer()
                assert status == 200, body
                yield subject
            finally:
                await source.close()
                await discovery.close()


async def test_a_refresh_between_a_dropped_pod_watch_and_its_reopen_serves_the_runtime(adapter: Adapter) -> None:
    held = await adapter.dropped_and_held()
    status, body = await adapter.answer()
    assert status == 200, body  # it was 503 "pod discovery out of date" for the whole scope
    await adapter.reopened(held)
    status, body = await adapter.answer()
    assert status == 200, body


async def test_every_one_of_many_dropped_streams_resumed_at_once_keeps_the_runtime_served_and_misses_nothing(
        adapter: Adapter) -> None:
    """A pod created while each stream is down reaches discovery once it is resumed: nothing was missed."""
    for drop in range(12):
        held = await adapter.dropped_and_held()
        adapter.kube.add_pod(NS, f"other-{drop}", labels={"modelmesh-service": "modelmesh-serving", "name": "other"})
        status, body = await adapter.answer()
        assert status == 200, (drop, body)
        await adapter.reopened(held)
        await eventually(lambda: adapter.discovery.pod_uid(NS, f"other-{drop}") is not None)  # noqa: B023
        status, body = await adapter.answer()
        assert status == 200, (drop, body)


async def test_a_dropped_pod_watch_still_down_past_the_grace_is_out_of_date_until_it_is_back(
        adapter: Adapter, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch does not come back (its reopen unanswered): past the grace, events may be missing, so the runtime
    holds (503) as in any discovery outage, and is served again once the watch is."""
    monkeypatch.setattr(watch_ends, "DROPPED_GRACE_S", 0.0)  # "past the grace" without sleeping through it
    held = await adapter.dropped_and_held()
    status, body = await adapter.answer()
    assert status == 503 and "pod discovery out of date" in body, body
    await adapter.reopened(held)
    status, body = await adapter.answer()
    assert status == 200, body


async def test_a_dropped_pod_watch_whose_reopen_is_refused_is_out_of_date_at_once(adapter: Adapter) -> None:
    """A reopen the API server answers with a failure (here a 503 of an API server shutting down) is no resumed
    watch: out of date at once, as before, whatever the grace."""
    failures = adapter.pod_watch_failures()
    await eventually(adapter.pod_watch_open)
    adapter.kube.fail(adapter.pods_path, 503, times=None, method="GET")
    adapter.kube.end_watches(abort=True)
    await eventually(lambda: adapter.pod_watch_failures() >= failures + 2)  # the drop, then its reopen refused
    status, body = await adapter.answer()
    assert status == 503 and "pod discovery out of date" in body, body
    adapter.kube.clear_faults()
    await eventually(lambda: adapter.discovery.healthy)
    status, body = await adapter.answer()
    assert status == 200, body


async def test_a_pod_watch_dropped_by_an_api_server_outage_is_out_of_date_and_said_so(
        adapter: Adapter, caplog: pytest.LogCaptureFixture) -> None:
    """The API server goes away (its streams dropped, new connections refused): the reopen fails as the drop did (no
    answer), and that is an outage: the runtime holds (503), and the log says so, not only that it was resuming."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    failures = adapter.pod_watch_failures()
    await adapter.kube.pause()
    try:
        await eventually(lambda: adapter.pod_watch_failures() >= failures + 2)  # the drop, then its reopen refused
        status, body = await adapter.answer()
        assert status == 503 and "pod discovery out of date" in body, body
        await eventually(lambda: any(line.startswith(
            "Kubernetes discovery: pod watch of ") and "broken, keeping last inventory; its runtimes are unknown (503) "
            "until it recovers" in line for line in watch_lines(caplog)))
    finally:
        await adapter.kube.resume()
    await eventually(lambda: adapter.discovery.healthy)
    status, body = await adapter.answer()
    assert status == 200, body


def watch_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "autoscaler.sources.kube_pods" and "pod watch" in record.getMessage()]
