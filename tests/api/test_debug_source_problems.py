"""/debug says why a runtime answers 503 when the cause is the metric source: the source's error, in the
backend's own words, and since when it fails. Before, an operator saw only "metric source down" and had to
find the adapter's log line of the outage's start (logged once) to learn that Prometheus refused connections,
or that one pod's exporter did.

Real sources against real sockets: a Prometheus URL where nothing listens, exporters where nothing listens.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.debug_document import debug_json, explanation
from autoscaler.api.render import SnapshotPublisher
from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import PodTarget, RuntimeInventory, SourceProblem
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.scrape import ScrapeSource
from tests.api.builders import runtime_view, served_source
from tests.sources.static_discovery import StaticDiscovery
from tests.support.debug_answers import debug_body
from tests.support.ports import free_port

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
KEY = RuntimeKey("ml", "modelmesh-serving-triton")
T0 = 1_700_000_000.0
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment={KEY.deployment}")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def debug(client: Client) -> dict[str, Any]:
    async with client.get(DEBUG) as response:
        assert response.status == 200
        document: dict[str, Any] = await response.json()
        return document


async def test_debug_shows_why_prometheus_fails_and_since_when(aiohttp_client: ClientFactory) -> None:
    clock = Clock()
    port = free_port()  # nothing listens there: connection refused
    discovery = StaticDiscovery.of({(KEY.namespace, KEY.deployment): ["triton-0", "triton-1"]})
    source = PrometheusSource(discovery, f"http://127.0.0.1:{port}", timeout_s=2.0, clock=clock)
    refresher, client = await served_source(source, clock, aiohttp_client)
    try:
        await refresher.refresh_once()
        clock.now += 15
        await refresher.refresh_once()  # still down: the outage began at the first refresh

        async with client.get(METRIC) as response:
            assert response.status == 503
            message = (await response.json())["message"]
        assert message.endswith(f"the HPA holds its current replicas; why: {DEBUG} on an adapter pod"), message
        async with client.get(f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}") as response:
            assert response.status == 503
            message = (await response.json())["message"]
        assert message.endswith(f"scalers should hold; why: {DEBUG} on an adapter pod"), message
        assert "HPA holds" not in message, message  # KEDA's answer, in its own words

        document = await debug(client)
        assert document["source"]["name"] == "prometheus"
        [problem] = document["source"]["problems"]
        assert problem["reason"] == "connect"
        assert f"127.0.0.1:{port}" in problem["detail"], problem
        assert problem["since"] == rfc3339(T0)
        assert problem["pod"] is None
    finally:
        await source.close()


async def test_debug_shows_which_exporter_fails_and_since_when(aiohttp_client: ClientFactory) -> None:
    clock = Clock()
    port = free_port()
    pods = (PodTarget("triton-0", ready=True, url=f"http://127.0.0.1:{port}/metrics"),)
    discovery = StaticDiscovery([RuntimeInventory(KEY, pods)])
    source = ScrapeSource(discovery, timeout_s=2.0, clock=clock)
    refresher, client = await served_source(source, clock, aiohttp_client)
    try:
        await refresher.refresh_once()
        clock.now += 60  # past the backoff: tried again, still refused
        await refresher.refresh_once()

        document = await debug(client)
        assert document["source"]["name"] == "scrape"
        [problem] = document["source"]["problems"]
        assert (problem["pod"], problem["reason"], problem["since"]) == ("triton-0", "connect", rfc3339(T0))
        assert f"127.0.0.1:{port}" in problem["detail"], problem
    finally:
        await source.close()


async def test_debug_shows_discovery_out_of_date(aiohttp_client: ClientFactory) -> None:
    clock = Clock()
    discovery = StaticDiscovery.of({(KEY.namespace, KEY.deployment): ["triton-0"]})
    discovery.healthy = False
    source = ScrapeSource(discovery, clock=clock)
    refresher, client = await served_source(source, clock, aiohttp_client)
    try:
        await refresher.refresh_once()
        [problem] = (await debug(client))["source"]["problems"]
        assert (problem["reason"], problem["since"]) == ("discovery", rfc3339(T0))

        discovery.healthy = True
        clock.now += 15
        await refresher.refresh_once()
        assert (await debug(client))["source"]["problems"] == []
    finally:
        await source.close()


_text = st.text(st.characters(codec="utf-8"), max_size=40)
_problem = st.builds(SourceProblem, _text, _text, st.floats(0, 4e9, allow_nan=False),
                     st.none() | _text)


@given(st.sampled_from(["scrape", "prometheus"]), st.lists(_problem, max_size=4))
def test_the_source_part_is_written_as_the_explanation_says(name: str, problems: list[SourceProblem]) -> None:
    """However the record is made, the served bytes are `json.dumps(explanation(...))`, problems included."""
    view = runtime_view()
    source = (name, tuple(problems))
    assert debug_body(view, None, source) == json.dumps(explanation(view, None, source)).encode()
    shown = explanation(view, None, source)["source"]
    assert [p["detail"] for p in shown["problems"]] == [p.detail for p in problems]


async def test_the_refresh_process_publishes_the_problems_to_its_workers() -> None:
    """`serve` with worker processes: the refresh process renders /debug (`SnapshotPublisher`) with the source's
    problems, as the one-process mode does."""
    clock = Clock()
    pods = (PodTarget("triton-0", ready=True, url=f"http://127.0.0.1:{free_port()}/metrics"),)
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, pods)]), timeout_s=2.0, clock=clock)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=clock, monotonic=clock)
    try:
        await refresher.refresh_once()
        publisher = SnapshotPublisher(refresher.metrics, refresher.policies, refresher.source)
        record = publisher.render(refresher.views, True).runtimes.debug_record((KEY.namespace, KEY.deployment))
        assert record is not None
        shown = json.loads(debug_json(record))["source"]
        assert shown["name"] == "scrape"
        assert [(p["pod"], p["reason"]) for p in shown["problems"]] == [("triton-0", "connect")]
    finally:
        await source.close()


async def test_a_failing_pod_no_longer_scraped_is_no_longer_shown() -> None:
    """A pod that turns unready (or goes away) is not scraped: its old error would mislead, and would be kept for
    every pod that ever failed."""
    clock = Clock()
    url = f"http://127.0.0.1:{free_port()}/metrics"
    discovery = StaticDiscovery([RuntimeInventory(KEY, (PodTarget("triton-0", True, url),
                                                        PodTarget("triton-1", True, url)))])
    source = ScrapeSource(discovery, timeout_s=2.0, clock=clock)
    try:
        await source.collect(clock.now)
        assert sorted(p.pod or "" for p in source.problems(KEY)) == ["triton-0", "triton-1"]
        discovery.set_runtime(RuntimeInventory(KEY, (PodTarget("triton-0", False, url),)))
        clock.now += 60
        await source.collect(clock.now)
        assert source.problems(KEY) == ()
    finally:
        await source.close()
