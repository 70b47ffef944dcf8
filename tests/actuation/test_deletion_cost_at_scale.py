"""The deletion-cost writer as a platform engineer sees it at fleet size, against the fake Kubernetes API: what
the API server receives while recommendations fall slowly, while it throttles, and what the log says when many
pods or runtimes are in the same state at once."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.actuation.deletion_cost_plan import PodRecord
from autoscaler.kube.client import KubeClient
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock, add_pods, pod_view, runtime_view
from tests.fakes.kube import FakeKubeApi

REFRESH_S = 15.0


def writer_on(kube_client: KubeClient, clock: SteppedClock, **settings: object) -> DeletionCostWriter:
    options: dict[str, object] = {"qps": None, **settings}
    return DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(**options),  # type: ignore[arg-type]
                              clock=clock, rand=lambda: 1.0)


async def test_a_slow_fall_below_the_replicas_writes_each_pod_at_most_once_a_minute_after_the_first(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The served recommendation falls from 4 to 2.4 over four minutes (the slow scale-down), a little at every
    refresh, while two pods' needs hover at a bucket edge. The costs are written at once when the HPA is about
    to act (at 3.0, a whole replica below 4: from 3.9 to 3.1 the HPA, rounding up, keeps 4); otherwise the minute
    per pod holds."""
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.deletion_cost")
    pods = ["pod-a", "pod-b", "pod-c", "pod-d"]
    add_pods(kube, pods)
    writer = writer_on(kube_client, clock)
    writer.offer({KEY: runtime_view([pod_view(name, 500) for name in pods], desired=4.0, current=4)})
    await writer.sync()
    kube.clear_requests()

    desired = 4.0
    for step in range(16):  # four minutes of refreshes, every one a little lower: 3.9 .. 2.4
        clock.advance(REFRESH_S)
        desired = round(desired - 0.1, 1)
        flip = 100 * (step % 2)  # pod-a and pod-b swap buckets at every refresh
        view = runtime_view([pod_view("pod-a", 400 + flip), pod_view("pod-b", 500 - flip),
                             pod_view("pod-c", 500), pod_view("pod-d", 500)], desired=desired, current=4)
        writer.offer({KEY: view})
        await writer.sync()

    per_pod = Counter(patch.name for patch in kube.patches)
    # Once when the HPA is about to remove a pod, and at most once a minute: 1 + 4 minutes' worth.
    assert max(per_pod.values()) <= 1 + 4
    announcements = [r for r in caplog.records if "writing deletion costs now" in r.getMessage()]
    assert len(announcements) == 1


def fleet(runtimes: int, pods: int, *, desired: float | None = None, current: int | None = None
          ) -> dict[RuntimeKey, RuntimeView]:
    """`runtimes` runtimes of `pods` pods each, spread over four namespaces, every pod at its own bucket."""
    views = {}
    for i in range(runtimes):
        key = RuntimeKey(f"team-{i % 4}", f"modelmesh-serving-rt-{i:04d}")
        views[key] = runtime_view([pod_view(f"rt-{i:04d}-{j}", 100 * (j % 10)) for j in range(pods)], key=key,
                                  desired=desired, current=current)
    return views


def add_fleet(kube: FakeKubeApi, views: dict[RuntimeKey, RuntimeView]) -> None:
    for key, view in views.items():
        add_pods(kube, [pod.name for pod in view.pods], namespace=key.namespace)


async def test_a_fleet_wide_drop_in_load_is_one_log_line(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.deletion_cost")
    views = fleet(200, 2, desired=2.0, current=2)
    add_fleet(kube, views)
    writer = writer_on(kube_client, clock, concurrency=8)
    writer.offer(views)
    await writer.sync()

    clock.advance(REFRESH_S)
    writer.offer(fleet(200, 2, desired=1.0, current=2))
    await writer.sync()

    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith("200 runtimes' recommendations are below their replicas")
    assert lines[0].endswith("and 190 more")


class TimedAnnotator:
    """The real client, noting when each patch was sent (real time: throttling is about real seconds)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.sent: list[float] = []

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        self.sent.append(time.monotonic())
        await self.client.patch_pod_annotations(namespace, name, annotations)


async def test_throttling_with_retry_after_pauses_every_write_not_just_the_refused_pod(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """API Priority and Fairness answers 429 with Retry-After for the adapter's whole flow: sending the other
    pods' patches meanwhile only earns more 429s and load on a server that asked for a pause."""
    views = fleet(10, 2)
    add_fleet(kube, views)
    annotator = TimedAnnotator(kube_client)
    writer = DeletionCostWriter(annotator, AdapterMetrics(), settings=WriterSettings(qps=None, concurrency=1),
                                clock=clock, rand=lambda: 1.0)
    kube.fail("/pods/", 429, times=1, retry_after=1)
    writer.offer(views)

    await writer.sync()

    first, *others = annotator.sent
    assert len(others) == 19
    assert others[0] - first >= 0.95
    assert [p.status for p in kube.patches].count(429) == 1


def warnings_in(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_refusals_at_fleet_size_are_a_line_per_cause_naming_the_missing_permission_once(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The Role was not copied to one runtime namespace, and the API server fails a few patches elsewhere,
    interleaved with successes."""
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.deletion_cost")
    views = fleet(40, 2)
    add_fleet(kube, views)
    kube.forbid("patch", "pods", "team-3")  # 20 pods
    kube.fail(r"/team-[0-2]/pods/rt-00\d\d-1$", 503, times=None)  # 30 pods, no Retry-After
    writer = writer_on(kube_client, clock, concurrency=4, batch_size=1000)
    writer.offer(views)
    await writer.sync()

    first = warnings_in(caplog)
    assert len(first) == 2
    [forbidden] = [line for line in first if "403" in line]
    assert "20 pods" in forbidden and "team-3" in forbidden
    assert 'cannot patch resource "pods" in API group "" in the namespace "team-3"' in forbidden
    [unavailable] = [line for line in first if "503" in line]
    assert "pods" in unavailable and "and " in unavailable  # a count and a short list, not 38 lines

    caplog.clear()
    for _ in range(24):  # ten minutes of refreshes: the retries and the 5-minute retry of the refusals
        clock.advance(25)
        writer.offer(views)
        await writer.sync()
    assert warnings_in(caplog) == []

    kube.clear_faults()
    clock.advance(300)
    writer.offer(views)
    await writer.sync()
    recovered = [r.getMessage() for r in caplog.records if "written again" in r.getMessage()]
    assert len(recovered) == 2


async def test_the_metrics_tell_a_missing_role_from_a_failing_api_server(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """`result="failed"` alone does not say whether a Role is missing or a webhook refuses: the status does."""
    views = fleet(8, 2)
    add_fleet(kube, views)
    kube.forbid("patch", "pods", "team-3")  # runtimes 3 and 7: 4 pods
    kube.fail(r"/team-0/pods/rt-0000-1$", 503, times=None)  # 1 pod
    metrics = AdapterMetrics()
    writer = DeletionCostWriter(kube_client, metrics, settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 1.0)
    writer.offer(views)
    await writer.sync()

    def errors(code: str) -> float | None:
        return metrics.registry.get_sample_value("modelmesh_autoscaler_deletion_cost_patch_errors_total",
                                                 {"code": code})
    assert (errors("403"), errors("503")) == (4.0, 1.0)
    assert metrics.registry.get_sample_value("modelmesh_autoscaler_deletion_cost_patches_total",
                                             {"result": "ok"}) == 16 - 4 - 1


async def test_when_the_api_cannot_keep_up_no_namespace_waits_longer_for_its_changed_costs(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """More costs change than one pass may write (a fleet at the qps limit): the backlog is worked off oldest
    first, so a runtime in a namespace late in the alphabet is not written less often than one early in it."""
    keys = [RuntimeKey("team-a", "modelmesh-serving-rt"), RuntimeKey("team-z", "modelmesh-serving-rt")]
    for key in keys:
        add_pods(kube, [f"{key.namespace}-{j}" for j in range(10)], namespace=key.namespace)
    writer = writer_on(kube_client, clock, batch_size=4)
    for step in range(40):  # ten minutes; every pod changes bucket every minute: 20 a minute, 16 written
        cost = 100 * ((step // 4) % 2)
        writer.offer({key: runtime_view([pod_view(f"{key.namespace}-{j}", cost) for j in range(10)], key=key)
                      for key in keys})
        await writer.sync()
        clock.advance(REFRESH_S)

    written = Counter(patch.namespace for patch in kube.patches)
    assert written["team-z"] >= 0.9 * written["team-a"], written


class NoApi:
    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        raise AssertionError("nothing is due")


async def test_planning_a_fleet_leaves_the_event_loop_to_the_metrics_api(
    clock: SteppedClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Looking through 20,000 pods for the few due takes a few hundred milliseconds of Python; on the event
    loop that serves the HPA, every request waited that long at every refresh. Shown without timing: the
    planning waits until the loop has run something else, which it can only do while it plans off the loop
    (on the loop it would wait out its 10 s and see nothing run)."""
    views = fleet(2000, 10)
    writer = DeletionCostWriter(NoApi(), AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock)
    for key, view in views.items():  # every pod written a moment ago: nothing is due
        for name, _, _, cost in view.pods.deletion_costs():
            writer.records[(key.namespace, name)] = PodRecord(cost=cost, written_at=clock.now)
    clock.advance(REFRESH_S)
    writer.offer(views)
    loop_ran = threading.Event()
    saw_the_loop_run: list[bool] = []
    plan = writer._due.plan

    def plan_once_the_loop_ran(*args: Any) -> Any:
        saw_the_loop_run.append(loop_ran.wait(timeout=10))
        return plan(*args)

    monkeypatch.setattr(writer._due, "plan", plan_once_the_loop_ran)

    async def other_work() -> None:  # what the loop also serves: an HPA's request
        await asyncio.sleep(0.005)
        loop_ran.set()

    task = asyncio.create_task(other_work())
    try:
        assert await writer.sync() == 0
    finally:
        task.cancel()
    assert saw_the_loop_run == [True]


async def test_a_new_leaders_first_writes_do_not_hold_back_a_changed_cost(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """A new leader writes every pod once (at fleet size that takes many passes at the qps limit); the costs
    are most likely right already, written by the previous leader. A cost this leader wrote and that changed
    since is known to be wrong in the cluster: it does not wait behind the backlog of first writes."""
    views = fleet(10, 4)
    add_fleet(kube, views)
    writer = writer_on(kube_client, clock, batch_size=4)
    writer.offer(views)
    await writer.sync()  # the first 4 of 40 first writes
    first = [patch.name for patch in kube.patches]
    kube.clear_requests()

    clock.advance(60)
    changed = {key: runtime_view([pod_view(pod.name, 900 if pod.name in first else pod.deletion_cost or 0)
                                  for pod in view.pods], key=key) for key, view in views.items()}
    for _ in range(2):  # two passes of 4, of 36 first writes and 4 changed costs due
        clock.advance(REFRESH_S)
        writer.offer(changed)
        await writer.sync()
    assert set(first) <= {patch.name for patch in kube.patches}
