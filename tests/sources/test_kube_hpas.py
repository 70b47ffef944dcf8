"""HpaWatch against the fake Kubernetes API: which HPA scales which runtime, and its bounds kept current."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch, parse_hpa
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
OVMS = RuntimeKey(NS, "modelmesh-serving-ovms")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
async def watch(kube: FakeKubeApi) -> AsyncIterator[HpaWatch]:
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30,
                       backoff=lambda n: 0.02)
    await subject.start()
    yield subject
    await subject.close()


def started_watch(kube: FakeKubeApi, backoff: Callable[[int], float]) -> HpaWatch:
    settings = Configuration()
    settings.host = kube.url
    return HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, backoff=backoff)


def hpa_lists(kube: FakeKubeApi) -> int:
    """List requests for HPAs the fake answered (watches excluded), whatever the status."""
    return sum(1 for r in kube.requests
               if r.resource == "horizontalpodautoscalers" and r.query.get("watch", "").lower() != "true")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "autoscaler.sources.kube_hpas" and r.levelno >= logging.WARNING]


async def test_bounds_follow_the_hpa_that_targets_the_deployment(kube: FakeKubeApi, watch: HpaWatch) -> None:
    kube.add_hpa(NS, "triton", min_replicas=2, max_replicas=100, target=("Deployment", TRITON.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (2, 100))
    assert watch.ok
    kube.set_hpa_bounds(NS, "triton", max_replicas=40)
    await eventually(lambda: watch.bounds(TRITON) == (2, 40))
    kube.delete_object("horizontalpodautoscalers", NS, "triton")
    await eventually(lambda: watch.bounds(TRITON) == (None, None))


async def test_an_hpa_is_matched_by_runtime_scale_or_by_metric_selector(kube: FakeKubeApi, watch: HpaWatch) -> None:
    kube.add_hpa(NS, "by-scale", max_replicas=8, target=("RuntimeScale", "triton"))
    kube.add_hpa(NS, "by-selector", max_replicas=12, target=("RuntimeScale", "other"),
                 metric_selector={"servingruntime": "ovms"})
    await eventually(lambda: watch.bounds(TRITON) == (1, 8) and watch.bounds(OVMS) == (1, 12))
    assert watch.bounds(RuntimeKey(NS, "modelmesh-serving-other")) == (None, None)


async def test_a_runtime_scale_named_unlike_its_runtime_lends_its_name_no_bounds(
    kube: FakeKubeApi, watch: HpaWatch,
) -> None:
    """A RuntimeScale called `triton` whose `spec.servingRuntime` is ovms: its HPA selects ovms by metric, as
    the docs say to. The name once gave triton that HPA's bounds too (with a warning of two HPAs, had triton
    one of its own), capping a runtime that HPA never scales."""
    kube.add_hpa(NS, "triton", max_replicas=30, target=("Deployment", TRITON.deployment))
    kube.add_hpa(NS, "ovms", max_replicas=4, target=("RuntimeScale", "triton"),
                 metric_selector={"servingruntime": "ovms"})
    await eventually(lambda: watch.bounds(OVMS) == (1, 4) and watch.bounds(TRITON) == (1, 30))


async def test_an_hpa_of_ours_named_like_its_runtime_deployment_is_warned_about_once(
    kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """modelmesh-serving manages the HPA named like a runtime's Deployment: with no autoscaler class it replaces
    ours with a CPU HPA on the Deployment, then deletes it. Its own (class `hpa`: the Deployment as target, no
    metric of ours) is not warned about."""
    caplog.set_level(logging.WARNING, logger="autoscaler.sources.kube_hpas")
    kube.add_hpa(NS, OVMS.deployment, max_replicas=3)  # modelmesh-serving's own, for a runtime of class hpa
    kube.add_hpa(NS, TRITON.deployment, max_replicas=8, target=("RuntimeScale", "triton"),
                 metric_selector={"servingruntime": "triton"})
    await eventually(lambda: watch.bounds(TRITON) == (1, 8) and watch.bounds(OVMS) == (1, 3))
    kube.set_hpa_bounds(NS, TRITON.deployment, max_replicas=9)  # another event for it: no second warning
    await eventually(lambda: watch.bounds(TRITON) == (1, 9))
    assert warnings_of(caplog) == [
        f"HPA {NS}/{TRITON.deployment} has the name of the runtime Deployment it scales, which is "
        "modelmesh-serving's: while the ServingRuntime has no autoscaler class, its controller replaces this HPA "
        f"with a CPU HPA on the Deployment and then deletes it; give it another name (e.g. "
        f"{TRITON.deployment}-autoscaler)"]


async def test_an_hpa_listed_before_the_watch_started_is_found(kube: FakeKubeApi) -> None:
    kube.add_hpa(NS, "early", max_replicas=5, metric_selector={"deployment": TRITON.deployment})
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS])
    await subject.start()
    try:
        await eventually(lambda: subject.bounds(TRITON)[1] == 5)
    finally:
        await subject.close()


async def test_the_bounds_are_known_when_start_returns(kube: FakeKubeApi) -> None:
    """The adapter's first refresh comes right after `start()`: a restarted adapter served 4 above an HPA's
    maxReplicas of 3 for one refresh, before its first list had arrived (the design: never above the cap)."""
    kube.add_hpa(NS, "early", max_replicas=3, metric_selector={"deployment": TRITON.deployment})
    kube.delay("horizontalpodautoscalers", 0.3)  # a first list that takes a moment, as at fleet size
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS])
    await subject.start()
    try:
        assert subject.bounds(TRITON) == (1, 3)
        assert subject.ok
    finally:
        await subject.close()


async def test_a_first_list_that_never_answers_delays_start_by_the_request_timeout_only(kube: FakeKubeApi) -> None:
    kube.delay("horizontalpodautoscalers", 30.0)
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS], request_timeout_s=0.5)
    try:
        await asyncio.wait_for(subject.start(), timeout=5)
        assert subject.bounds(TRITON) == (None, None) and not subject.ok
    finally:
        await subject.close()


@pytest.mark.parametrize(
    ("spec", "bounds"),
    [
        ({"maxReplicas": 10, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, (1, 10)),
        ({"minReplicas": 3, "maxReplicas": 10, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, (3, 10)),
        ({"maxReplicas": 0, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, None),
        ({"maxReplicas": "10", "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, None),
        ({"maxReplicas": 10, "scaleTargetRef": {"kind": "StatefulSet", "name": "d"}}, None),
    ],
    ids=["min_defaults_to_one", "both", "zero_max_is_malformed", "string_max_is_malformed", "not_a_runtime"],
)
def test_parse_hpa(spec: dict[str, object], bounds: tuple[int, int] | None) -> None:
    parsed = parse_hpa({"metadata": {"namespace": NS, "name": "h"}, "spec": spec})
    assert (None if parsed is None else (parsed.min_replicas, parsed.max_replicas)) == bounds


@pytest.mark.parametrize("status", [403, 500])
async def test_a_list_that_fails_gives_no_bounds_logs_once_and_retries_with_backoff(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    kube.add_hpa(NS, "triton", max_replicas=5, target=("Deployment", TRITON.deployment))
    kube.fail("/horizontalpodautoscalers", status, times=None)
    waits: list[int] = []
    subject = started_watch(kube, lambda n: waits.append(n) or 0.02)  # type: ignore[func-returns-value]
    await subject.start()
    try:
        await eventually(lambda: len(waits) >= 4)
        assert subject.bounds(TRITON) == (None, None)
        assert not subject.ok
        assert waits[:4] == [1, 2, 3, 4], "each retry waits for the backoff of one more failure in a row"
        await eventually(lambda: bool(warnings_of(caplog)))  # said once the watches are quiet for a second
        retries = len(waits)
        await eventually(lambda: len(waits) >= retries + 3)  # and not again at the retries that follow
        [warning] = warnings_of(caplog)
        assert str(status) in warning and "namespace modelmesh-serving" in warning

        kube.clear_faults()
        await eventually(lambda: subject.bounds(TRITON) == (1, 5))
        assert subject.ok
    finally:
        await subject.close()


async def test_an_expired_watch_relists_and_sees_changes_and_deletions_it_missed(
    kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_hpa(NS, "triton", max_replicas=5, target=("Deployment", TRITON.deployment))
    kube.add_hpa(NS, "ovms", max_replicas=9, target=("Deployment", OVMS.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (1, 5) and watch.bounds(OVMS) == (1, 9))
    await kube.wait_for_watches(1, "horizontalpodautoscalers")
    lists = hpa_lists(kube)

    # The watch ends; before the client comes back, one HPA changes, one goes, and the history is compacted:
    # its resourceVersion is too old now (410 Expired) and only a new list can tell it what happened.
    kube.end_watches()
    kube.set_hpa_bounds(NS, "triton", max_replicas=7)
    kube.delete_object("horizontalpodautoscalers", NS, "ovms")
    kube.compact()

    await eventually(lambda: watch.bounds(TRITON) == (1, 7) and watch.bounds(OVMS) == (None, None))
    assert hpa_lists(kube) == lists + 1
    assert any(r.status == 200 and r.query.get("watch") for r in kube.requests), "the watch was answered"
    assert watch.ok
    assert warnings_of(caplog) == [], "an expired watch is routine, not a failure"
    await kube.wait_for_watches(1, "horizontalpodautoscalers")


async def test_a_failing_watch_keeps_the_bounds_last_seen_then_finds_what_it_missed(
    kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_hpa(NS, "triton", max_replicas=5, target=("Deployment", TRITON.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (1, 5))
    await kube.wait_for_watches(1, "horizontalpodautoscalers")
    fault = kube.fail("/horizontalpodautoscalers", 500, times=None)
    kube.end_watches()  # every watch and list is refused from now on; meanwhile the HPA is raised to 8
    kube.set_hpa_bounds(NS, "triton", max_replicas=8)
    kube.compact()

    await eventually(lambda: fault.hits >= 3)
    assert watch.bounds(TRITON) == (1, 5), "a lost watch must not lift a cap, nor guess a new one"
    assert not watch.ok
    await eventually(lambda: bool(warnings_of(caplog)))  # said once the watches are quiet for a second
    hits = fault.hits
    await eventually(lambda: fault.hits >= hits + 3)
    assert len(warnings_of(caplog)) == 1
    kube.clear_faults()
    await eventually(lambda: watch.bounds(TRITON) == (1, 8) and watch.ok)


async def test_a_watch_that_resumes_after_a_failure_is_ok_again(kube: FakeKubeApi, watch: HpaWatch) -> None:
    kube.add_hpa(NS, "triton", max_replicas=5, target=("Deployment", TRITON.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (1, 5) and watch.ok)
    await kube.wait_for_watches(1, "horizontalpodautoscalers")
    fault = kube.fail("/horizontalpodautoscalers", 500, times=2)
    kube.end_watches()  # two refused watches, then the third resumes where the first left off: no list
    await eventually(lambda: fault.hits == 2)
    lists = hpa_lists(kube)
    await kube.wait_for_watches(1, "horizontalpodautoscalers")
    await eventually(lambda: watch.ok)
    kube.set_hpa_bounds(NS, "triton", max_replicas=4)
    await eventually(lambda: watch.bounds(TRITON) == (1, 4))
    assert hpa_lists(kube) == lists


async def test_a_watch_that_was_warned_about_says_when_it_works_again(
    kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture
) -> None:
    """"failing, keeping the bounds last seen" was the last word: an operator reading the log could not tell
    whether the bounds were current again. Pod discovery says "established"; the HPA watch says so too, once."""
    kube.add_hpa(NS, "triton", max_replicas=5, target=("Deployment", TRITON.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (1, 5) and watch.ok)
    await kube.wait_for_watches(1, "horizontalpodautoscalers")
    with caplog.at_level(logging.INFO, "autoscaler.sources.kube_hpas"):
        fault = kube.fail("/horizontalpodautoscalers", 503, times=3)
        kube.end_watches()
        await eventually(lambda: fault.hits == 3)
        await kube.wait_for_watches(1, "horizontalpodautoscalers")
        await eventually(lambda: watch.ok)
        kube.end_watches()  # a routine end of a watch, resumed: nothing to say
        await kube.wait_for_watches(1, "horizontalpodautoscalers")
        kube.set_hpa_bounds(NS, "triton", max_replicas=4)
        await eventually(lambda: watch.bounds(TRITON) == (1, 4))
        await eventually(lambda: any("works again" in r.getMessage() for r in caplog.records))  # quiet a second

    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "autoscaler.sources.kube_hpas"
            and "HPA watch" in r.getMessage()]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    assert said[1][1] == "HPA watch of namespace modelmesh-serving works again; the bounds are current"
