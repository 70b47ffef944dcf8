"""With `--source scrape`, an exporter whose every model last-served time is garbage (NaN, negative, +Inf) read as
one that does not publish the series at all: `recent_models` None and nothing else said. That is evidence that
ModelMesh stopped reporting per-model use, so after `target_lru_age_s` (600 s by default) of such garbage the
runtime forgot its per-model use and `modelmesh_desired_replicas` fell on garbage. Now the runtime's snapshot says
`models_unread` for such a reading (as the Prometheus source's does for a pod whose every time is garbage), and
the memory does not age while it lasts.

The real scrape source against exporter stand-ins on real sockets; its snapshots decided refresh after refresh.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from autoscaler.api.app import build_api_app
from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.exposition import read_exporter_text
from autoscaler.sources.scrape import ScrapeSource
from exporter import names
from tests.sources.static_discovery import StaticDiscovery
from tests.support.exporter_texts import exporter_text

KEY = RuntimeKey("ml", "modelmesh-serving-models")
START = 2_000_000_000.0
STEP = 15.0
POLICY = RuntimePolicy(scale_down_tau_s=0.0, target_rps_per_pod=20.0)  # target_lru_age_s: the 600 s default
GARBAGE = ["NaN", "-5", "+Inf"]


@given(st.lists(st.sampled_from([*GARBAGE, "recent", "1.5e9", "0"]), max_size=12), st.booleans())
def test_a_reading_is_models_unread_exactly_when_it_has_model_times_and_every_one_is_garbage(
        times: list[str], declared: bool) -> None:
    lines = exporter_text(0, START, None, declared).splitlines()
    lines += [f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{{names.MODEL_ID_LABEL}="m-{i}"}} '
              f'{repr(START - 1.0) if at == "recent" else at}' for i, at in enumerate(times)]
    reading = read_exporter_text("\n".join(lines) + "\n", "pod-0", True, START)
    all_garbage = bool(times) and all(at in GARBAGE for at in times)
    assert reading.models_unread == all_garbage
    if all_garbage:
        assert reading.sample.recent_models is None and reading.sample.requests_per_second == 10.0


class Fleet:
    """Exporter stand-ins for pods 0..n-1, each answering what `answers[pod]` says at the request's time."""

    def __init__(self, answers: list[str | None], declared: bool = False) -> None:
        self.answers = answers
        self.declared = declared
        self.now = START
        self.down: set[int] = set()
        """Pods whose exporter answers 503."""

    def clock(self) -> float:
        return self.now

    def text(self, pod: int) -> str:
        return exporter_text(pod, self.now, self.answers[pod], self.declared)


async def scrape_source(aiohttp_server: AiohttpServer, fleet: Fleet) -> ScrapeSource:
    async def exporter(request: web.Request) -> web.Response:
        pod = int(request.match_info["pod"])
        if pod in fleet.down:
            return web.Response(status=503, text="exporter not ready")
        return web.Response(text=fleet.text(pod))

    app = web.Application()
    app.router.add_get("/{pod}/metrics", exporter)
    server = await aiohttp_server(app)
    pods = tuple(PodTarget(f"pod-{i}", True, f"http://127.0.0.1:{server.port}/{i}/metrics")
                 for i in range(len(fleet.answers)))
    return ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, pods)]), timeout_s=5.0, clock=fleet.clock)


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("others", [[], ["recent"], [None]], ids=["alone", "beside-reporting", "beside-none"])
async def test_a_pod_whose_every_model_time_is_garbage_makes_its_runtime_models_unread(
        aiohttp_server: AiohttpServer, garbage: str, others: list[str | None]) -> None:
    fleet = Fleet([garbage, *others])
    source = await scrape_source(aiohttp_server, fleet)
    try:
        [snapshot] = await source.collect(fleet.now)
        assert snapshot.pods[0].recent_models is None
        assert snapshot.pods[0].requests_per_second == 10.0  # the load is read: only per-model use is not
        assert snapshot.models_unread
        fleet.answers[0] = "recent"  # the times are good again: read, and nothing is unread
        fleet.now += STEP
        [snapshot] = await source.collect(fleet.now)
        assert snapshot.pods[0].recent_models is not None and not snapshot.models_unread
    finally:
        await source.close()


@pytest.mark.parametrize(("answers", "declared"), [
    (["recent", "recent"], False),
    ([None, None], False),  # ModelMesh without per-model metrics: evidence that it reports none
    ([None, None], True),  # the series declared, no sample: nothing served recently
    (["recent", None], False),
], ids=["all-reporting", "no-series", "declared-empty", "one-without"])
async def test_readable_or_absent_model_times_are_not_unread(
        aiohttp_server: AiohttpServer, answers: list[str | None], declared: bool) -> None:
    fleet = Fleet(answers, declared)
    source = await scrape_source(aiohttp_server, fleet)
    try:
        [snapshot] = await source.collect(fleet.now)
        assert not snapshot.models_unread
    finally:
        await source.close()


def served(view: RuntimeView) -> float | None:
    return view.values[ServedMetric.DESIRED_REPLICAS].value


@pytest.mark.parametrize("garbage", GARBAGE)
async def test_700_s_of_garbage_model_times_never_lower_the_desired_replicas(
        aiohttp_server: AiohttpServer, garbage: str) -> None:
    """Four pods, each the only one to have served 10 models: 40 models at 6 a pod need 7 pods (the request term
    asks for 2). Then every exporter's model times turn to garbage for 700 s, past `target_lru_age_s`: the cache
    term holds 7 all along. Once they stop publishing the series, a whole window later the runtime forgets."""
    fleet = Fleet(["recent"] * 4)
    source = await scrape_source(aiohttp_server, fleet)
    memory: RuntimeMemory | None = None
    try:
        [snapshot] = await source.collect(fleet.now)
        view, memory = decide(snapshot, POLICY, memory, fleet.now, STEP * 2)
        assert served(view) == 7.0, view.reason
        fleet.answers = [garbage] * 4
        for _ in range(int(700 // STEP) + 1):
            fleet.now += STEP
            [snapshot] = await source.collect(fleet.now)
            view, memory = decide(snapshot, POLICY, memory, fleet.now, STEP * 2)
            assert served(view) == 7.0, (fleet.now - START, view.reason)
        fleet.answers = [None] * 4  # the exporters publish no model series: ModelMesh really reports none now
        for _ in range(int(POLICY.target_lru_age_s // STEP) + 1):
            fleet.now += STEP
            [snapshot] = await source.collect(fleet.now)
            view, memory = decide(snapshot, POLICY, memory, fleet.now, STEP * 2)
        assert served(view) == 2.0, view.reason
    finally:
        await source.close()


async def test_a_pod_held_after_garbage_model_times_keeps_its_runtime_models_unread(
        aiohttp_server: AiohttpServer) -> None:
    """The pod's last good reading had every model time garbage; then its scrapes fail. The sample held is that
    reading's, whose per-model use was unread: the snapshot said `models_unread` only at the refresh that read it,
    and after it read as a pod whose ModelMesh reports no per-model use, the evidence that ages the memory."""
    fleet = Fleet(["NaN", "recent"])
    source = await scrape_source(aiohttp_server, fleet)
    try:
        [snapshot] = await source.collect(fleet.now)
        assert snapshot.models_unread
        fleet.down = {0}
        for _ in range(3):
            fleet.now += STEP
            [snapshot] = await source.collect(fleet.now)
            assert snapshot.pods[0].recent_models is None and snapshot.pods[0].sampled_at == START  # held
            assert snapshot.models_unread
        fleet.down = set()
        fleet.answers[0] = "recent"
        fleet.now += 120.0  # past the failing pod's backoff
        [snapshot] = await source.collect(fleet.now)
        assert snapshot.pods[0].recent_models is not None and not snapshot.models_unread
    finally:
        await source.close()


async def test_a_pod_failing_after_a_good_reading_is_not_models_unread(aiohttp_server: AiohttpServer) -> None:
    fleet = Fleet(["recent"])
    source = await scrape_source(aiohttp_server, fleet)
    try:
        await source.collect(fleet.now)
        fleet.down = {0}
        fleet.now += STEP
        [snapshot] = await source.collect(fleet.now)
        assert snapshot.pods[0].recent_models is not None and not snapshot.models_unread
    finally:
        await source.close()


async def debug_problems(client: TestClient[Any, Any]) -> list[dict[str, Any]]:
    async with client.get(f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}") as response:
        assert response.status == 200
        problems: list[dict[str, Any]] = (await response.json())["source"]["problems"]
        return problems


async def test_debug_says_a_pods_per_model_use_is_unread_while_its_sample_holds_it(
        aiohttp_server: AiohttpServer, aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]]) -> None:
    """/debug said nothing of a pod whose exporter's model times were all garbage (its source problems empty, the
    cache term held for "per-model use missing", as for a ModelMesh without per-model metrics), nor once its
    scrapes failed and its sample was held. It shows a `garbage` problem naming the series, since the reading
    that had it, while the pod's sample is that reading's, beside the failed scrape's own problem."""
    fleet = Fleet(["NaN"])
    source = await scrape_source(aiohttp_server, fleet)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=fleet.clock, monotonic=fleet.clock)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    try:
        await refresher.refresh_once()
        [unread] = await debug_problems(client)
        assert unread["reason"] == REASON_GARBAGE and unread["pod"] == "pod-0", unread
        assert names.MODEL_LAST_SERVED_TIMESTAMP in unread["detail"] and "per-model use" in unread["detail"], unread
        assert unread["since"] == rfc3339(START), unread
        fleet.down = {0}
        fleet.now += STEP
        await refresher.refresh_once()
        problems = {problem["reason"]: problem for problem in await debug_problems(client)}
        assert problems.keys() == {"http", REASON_GARBAGE}, problems
        assert problems[REASON_GARBAGE] == unread  # the sample held is that reading's: still unread
        fleet.down = set()
        fleet.answers[0] = "recent"
        fleet.now += 120.0  # past the failing pod's backoff
        await refresher.refresh_once()
        assert await debug_problems(client) == []
    finally:
        await source.close()
