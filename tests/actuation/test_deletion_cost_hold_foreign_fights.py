"""Another writer's deletion cost on a pod, beyond one hand edit (s58 review of 2f227979): a tool that puts its
value back a moment after each of the leader's writes (a policy, another operator), the annotation removed by hand
(`kubectl annotate pod X controller.kubernetes.io/pod-deletion-cost-`, which the ReplicaSet reads as 0), and a pod
watch that lags or relists after the leader's write (no other writer at all).

Taking the value the pod carried before a write for the watch's lag for 10 s let a tool that put it back within
those 10 s through the ranking hold: the HPA read 2 with the busiest pod at -1000. A value the watch shows counts as
this replica's write's lag only until the watch has shown the write itself (its echo), or for `ECHO_WAIT_S`; the
ranking hold trusts no write the watch shows otherwise. The real refresher, writer and discovery's pod watch over
the fake Kubernetes API (as tests/actuation/test_deletion_cost_hold_foreign_cost.py), time stepped."""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.ranking_hold import COST_HOLD_MAX_S
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, add_pods, pod_view, runtime_view
from tests.actuation.test_deletion_cost_hold import BEFORE
from tests.actuation.test_deletion_cost_hold_foreign_cost import (
    FALLEN,
    annotate,
    fight_over_the_busiest_pod,
    fought_back,
    leader,
)
from tests.actuation.test_deletion_cost_recreated_pod import LABELS, cost_on, watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually


def foreign_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The writer's "another writer" lines (the ranking hold's say `overwritten by another writer` of a pod)."""
    return [r.getMessage() for r in caplog.records if "carry a cost another writer set" in r.getMessage()]


def remove(kube: FakeKubeApi, pod: str) -> None:
    """`kubectl annotate pod POD controller.kubernetes.io/pod-deletion-cost-`."""
    kube.update_object("pods", KEY.namespace, pod,
                       lambda o: o["metadata"].get("annotations", {}).pop(DELETION_COST_ANNOTATION, None))


@pytest.mark.parametrize("refresh_s", [2.0, 15.0])
async def test_a_tool_that_puts_its_cost_back_within_seconds_of_each_write_never_lets_the_value_fall_in_the_bound(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture,
        refresh_s: float) -> None:
    """The tool answers each PATCH of pod-a (the busiest) by putting -1000 back before the next refresh; 2f227979
    took that for the watch's lag for 10 s and served 2 at 149 of 150 refreshes of 2 s. Within the hold's bound
    the HPA reads 3; the pod is written again about once a minute, said once."""
    caplog.set_level(logging.INFO)
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        cluster.clock.advance(60.0)
        annotate(kube, "pod-a", "-1000")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")
        cluster.source.load = FALLEN
        seen: list[tuple[float, float, dict[str, int | None]]] = []
        elapsed, answered = 0.0, cluster.patched("pod-a")
        while elapsed < 300.0:
            await cluster.refresh(refresh_s)
            elapsed += refresh_s
            served = await cluster.served()
            seen.append((elapsed, served, cluster.costs()))
            if elapsed < COST_HOLD_MAX_S:
                assert served == 3.0 or cluster.least_needed_in_cluster() == ["pod-b"], seen[-3:]
            await cluster.written()
            if cluster.patched("pod-a") != answered:  # the tool puts its value back
                answered = cluster.patched("pod-a")
                annotate(kube, "pod-a", "-1000")
                await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")
    assert cluster.patched("pod-a") <= 1 + 300.0 / 60.0 + 1, cluster.patched("pod-a")
    assert len(foreign_lines(caplog)) == 1, foreign_lines(caplog)
    turned = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert len(turned) <= 300.0 / 60.0, turned


async def test_a_fought_pod_is_written_at_its_minute_after_the_fall_not_at_every_refresh(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The tool puts -1000 back within milliseconds; after the hold's bound the value falls and the ranking stays
    turned (pod-a busiest, carrying the lowest cost): the runtime is hurried, but pod-a, written again for another
    writer's value, waits its minute (2f227979: written at every refresh, 4 a minute, a line each time)."""
    caplog.set_level(logging.INFO)
    async with fight_over_the_busiest_pod(kube, kube_client, aiohttp_client) as (cluster, watch):
        before = cluster.patched("pod-a")
        for _ in range(20):  # 5 minutes
            await cluster.refresh()
            await fought_back(cluster, watch)
    assert cluster.patched("pod-a") - before <= 6, cluster.patched("pod-a") - before
    assert len(foreign_lines(caplog)) == 1, foreign_lines(caplog)
    turned = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert len(turned) <= 1, turned


@pytest.mark.parametrize("edit", ["removed", "drain-me"])
async def test_a_cost_removed_or_made_unreadable_by_hand_holds_the_scale_down_until_written_again(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture,
        edit: str) -> None:
    """`kubectl annotate pod pod-a controller.kubernetes.io/pod-deletion-cost-`: the ReplicaSet reads 0 on the
    busiest pod, the least; 2f227979 read the missing annotation as "not watched" and let the value fall. The
    line shows what is on the pod (a text that is no number as such, not "(0)")."""
    caplog.set_level(logging.INFO)
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        cluster.clock.advance(60.0)
        if edit == "removed":
            remove(kube, "pod-a")
            await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") is None)
        else:
            annotate(kube, "pod-a", edit)
            await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == edit)
        before = cluster.patched("pod-a")
        cluster.source.load = FALLEN
        await cluster.refresh()
        assert await cluster.served() == 3.0, cluster.costs()
        await cluster.until(lambda: cluster.patched("pod-a") > before, "wrote pod-a again")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") not in (None, edit))
        await cluster.refresh()
        assert await cluster.served() == 2.0 and cluster.least_needed_in_cluster() == ["pod-b"], cluster.costs()
    shown = "(none)" if edit == "removed" else f"({edit})"
    assert [line for line in foreign_lines(caplog) if f"pod-a {shown}" in line], foreign_lines(caplog)


async def test_a_hold_on_another_writers_cost_says_overwritten_not_queued(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any) -> None:
    """operations.md explains `queued` as the writer's backlog: a hold on a cost another writer put on the pod
    has its own reason, in /debug and in `scale_down_holds_total`."""
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        cluster.clock.advance(60.0)
        kube.fail(r"/pods/pod-a", status=503, times=None, method="PATCH")
        annotate(kube, "pod-a", "-1000")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")
        cluster.source.load = FALLEN
        await cluster.refresh()
        held = (await cluster.debug())["held"]["modelmesh_desired_replicas"]
        assert "overwritten by another writer (-1000)" in held, held
        assert "queued" not in held, held
        assert (await cluster.holds_counted()).get("overwritten") == 1.0, await cluster.holds_counted()


class LaggingWatch:
    """The pod watch as the fake API had the pods `lag` seconds ago (sampled after each step)."""

    def __init__(self, kube: FakeKubeApi, clock: SteppedClock, names: list[str], lag: float) -> None:
        self.kube, self.clock, self.lag = kube, clock, lag
        self.seen = {name: [(-1e9, self._now_on(name))] for name in names}

    def _now_on(self, name: str) -> str | None:
        return self.kube.pod_annotations(KEY.namespace, name).get(DELETION_COST_ANNOTATION)

    def sample(self) -> None:
        for name, history in self.seen.items():
            if (value := self._now_on(name)) != history[-1][1]:
                history.append((self.clock(), value))

    def deletion_cost(self, namespace: str, pod: str) -> str | None:
        return [value for at, value in self.seen[pod] if at <= self.clock() - self.lag][-1]

    def pod_uid(self, namespace: str, pod: str) -> str | None:
        return f"uid-{pod}"


@pytest.mark.parametrize("lag_s", [0.5, 12.0, 45.0])
async def test_a_lagging_pod_watch_is_no_other_writer(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, lag_s: float) -> None:
    """300 pods carrying 500, their costs written while a scale-down waits; the watch shows the writes `lag_s`
    late. 2f227979 said "another writer" of them and wrote 242-256 twice beyond 10 s of lag."""
    caplog.set_level(logging.INFO)
    clock = SteppedClock()
    names = [f"p{i:03d}" for i in range(300)]
    add_pods(kube, names)
    for name in names:
        annotate(kube, name, "500")
    watch = LaggingWatch(kube, clock, names, lag_s)
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 0.5, cluster=watch)
    view = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)], desired=299, current=300)
    calm = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)])
    for step in range(12):  # 3 minutes of 15 s refreshes, the scale-down pending for the first 30 s
        pending = step < 2
        if pending:
            writer.misordered(KEY, view, 1, None)
        writer.offer({KEY: view if pending else calm})
        await writer.sync()
        for _ in range(30):
            clock.advance(0.5)
            watch.sample()
    written = collections.Counter(patch.name for patch in kube.patches)
    assert foreign_lines(caplog) == []
    assert max(written.values()) == 1, [name for name, times in written.items() if times > 1][:5]


async def test_a_watch_that_relists_slowly_after_the_writes_is_no_other_writer(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """The pod watch ends right after the writes (410 on resume) and its relist takes 30 s of the writer's time:
    no "another writer", no pod written twice."""
    caplog.set_level(logging.INFO)
    names = [f"p{i:03d}" for i in range(300)]
    for name in names:
        kube.add_pod(KEY.namespace, name, labels=LABELS, annotations={DELETION_COST_ANNOTATION: "500"})
    watch = KubePodDiscovery(kube.client_configuration(), runtimes=[KEY], discover=False, resync_interval_s=0.1,
                             request_timeout_s=5.0, backoff_initial_s=0.02, backoff_max_s=0.1)
    await watch.start()
    try:
        await kube.wait_for_watches(1, "pods")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "p299") == "500")
        clock = SteppedClock()
        writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                    rand=lambda: 0.5, cluster=watch)
        view = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)],
                            desired=299, current=300)
        held = kube.hold_answer(r"/pods", times=None, method="GET")
        kube.end_watches()
        kube.compact()
        await eventually(lambda: held.hits >= 1)  # the watch's resume is held: from now on it shows no write
        for step in range(8):
            if step == 2:
                held.release()
                await eventually(lambda: watch.deletion_cost(KEY.namespace, "p001") == "100")
            writer.misordered(KEY, view, 1, None)
            writer.offer({KEY: view})
            await writer.sync()
            clock.advance(15.0)
            if step < 2:
                await asyncio.sleep(0.2)  # held: nothing reaches the watch meanwhile
            else:  # every write there is shown, before the writer looks again
                await eventually(lambda: all(watch.deletion_cost(KEY.namespace, name) == cost_on(kube, name)
                                             for name in names))
    finally:
        await watch.close()
    written = collections.Counter(patch.name for patch in kube.patches if patch.resource == "pods")
    assert foreign_lines(caplog) == []
    assert max(written.values()) == 1, [name for name, times in written.items() if times > 1][:5]


async def test_two_quick_writes_under_a_lagging_watch_are_no_other_writer(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """The ranking turns 2 s after the first writes, the watch 5 s behind: the first write, still shown while the
    second's echo is to come, is the watch's lag, not another writer's."""
    caplog.set_level(logging.INFO)
    clock = SteppedClock()
    names = ["p000", "p001", "p002"]
    add_pods(kube, names)
    for name in names:
        annotate(kube, name, "500")
    watch = LaggingWatch(kube, clock, names, 5.0)
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 0.5, cluster=watch)
    rankings = [{"p000": 900, "p001": 100, "p002": 0}, {"p000": 0, "p001": 900, "p002": 100}]
    for step in range(6):
        view = runtime_view([pod_view(name, cost) for name, cost in rankings[min(step, 1)].items()],
                            desired=2, current=3)
        writer.misordered(KEY, view, 1, None)
        writer.offer({KEY: view})
        await writer.sync()
        for _ in range(4):
            clock.advance(0.5)
            watch.sample()
    assert foreign_lines(caplog) == []
    written = collections.Counter(patch.name for patch in kube.patches)
    assert max(written.values()) == 2, written
