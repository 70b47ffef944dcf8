"""The echo of the leader's deletion-cost write, recorded from the pod watch's events (s58 review of e688a124).

e688a124 recorded the echo only when a pass looked at the pod (once a refresh): where the watch showed the
leader's value and then another writer's within the refresh, the echo was never seen, that value was taken for the
watch's lag for `ECHO_WAIT_S`, and the ranking hold ran out with the busiest pod at -1000 (F1); a tool putting its
value back 0.5-14 s after each write held the scale-down as `queued` ("written, not yet shown by the pod watch")
and was said only after 60 s (F2). And a watch connected but delivering nothing made every write another writer's
after 60 s: 300 pods written again each minute, lines naming them, the hold said `overwritten` (F3).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from autoscaler.actuation.cluster_pods import DeletionCostEvents, DeletionCostListener
from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.actuation.deletion_cost_memory import ECHO_WAIT_S
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.ranking_hold import EXPIRED, HoldReason
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, add_pods, pod_view, runtime_view
from tests.actuation.test_deletion_cost_hold import AFTER, BEFORE
from tests.actuation.test_deletion_cost_hold_foreign_cost import annotate, leader
from tests.actuation.test_deletion_cost_hold_foreign_fights import LaggingWatch, foreign_lines
from tests.actuation.test_deletion_cost_recreated_pod import watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

BEHIND = "the pod watch has shown none of this replica's writes"


class EchoingWatch(LaggingWatch):
    """`LaggingWatch` telling each value as it comes into view, as discovery's pod watch tells its events."""

    def __init__(self, kube: FakeKubeApi, clock: SteppedClock, names: list[str], lag: float) -> None:
        super().__init__(kube, clock, names, lag)
        self.listeners: list[DeletionCostListener] = []
        self.told = {name: 0 for name in names}

    def on_deletion_cost(self, listener: DeletionCostListener) -> None:
        self.listeners.append(listener)

    def sample(self) -> None:
        super().sample()
        for name, history in self.seen.items():
            shown = [value for at, value in history[1:] if at <= self.clock() - self.lag]
            for value in shown[self.told[name]:]:
                for listener in self.listeners:
                    listener(KEY.namespace, name, value)
            self.told[name] = len(shown)


def set_pods(kube: FakeKubeApi, names: list[str], cost: str = "500") -> None:
    add_pods(kube, names)
    for name in names:
        annotate(kube, name, cost)


def echoing_writer(kube: FakeKubeApi, kube_client: KubeClient, pods: int,
                   lag_s: float) -> tuple[SteppedClock, list[str], EchoingWatch, DeletionCostWriter]:
    """`pods` pods carrying 500, a pod watch `lag_s` behind that tells its events, and a leader's writer
    without a qps limit on the stepped clock."""
    clock = SteppedClock()
    names = [f"p{i:03d}" for i in range(pods)]
    set_pods(kube, names)
    watch = EchoingWatch(kube, clock, names, lag_s)
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 0.5, cluster=watch)
    return clock, names, watch, writer


async def test_an_edit_between_the_echo_and_the_next_refresh_is_written_over_at_that_refresh(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """F1 end to end: pod-b's write of the held ranking is refused once and lands after the second refresh; the
    watch shows it, then a hand edit of -1000, before the third. e688a124 took -1000 for the watch's lag: pod-b
    written again only at 90 s, after the hold `expired`. Now at the next refresh, said at once, and the value
    falls one refresh later onto costs that remove pod-a, the least needed."""
    caplog.set_level(logging.INFO)
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        cluster.clock.advance(60.0)
        cluster.source.load = AFTER  # pod-a the least needed, pod-b the busiest
        kube.fail(r"/pods/pod-b", status=503, times=1, method="PATCH")
        await cluster.refresh()
        await cluster.written()  # pod-b's 503 taken in
        await cluster.refresh()
        cluster.clock.advance(0.1)  # the PATCH lands a moment after the refresh
        await cluster.until(lambda: cluster.patched("pod-b") == 3, "wrote pod-b again")
        written = kube.pod_annotations(KEY.namespace, "pod-b")[DELETION_COST_ANNOTATION]
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-b") == written)  # the echo
        annotate(kube, "pod-b", "-1000")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-b") == "-1000")
        assert foreign_lines(caplog) == []
        await cluster.refresh(14.9)
        assert await cluster.served() == 3.0, cluster.costs()
        await cluster.until(lambda: cluster.patched("pod-b") == 4, "wrote pod-b over the edit")
        assert len(foreign_lines(caplog)) == 1 and "ml/pod-b (-1000)" in foreign_lines(caplog)[0]
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-b") == written)
        await cluster.refresh()
        assert await cluster.served() == 2.0 and cluster.least_needed_in_cluster() == ["pod-a"], cluster.costs()
        assert EXPIRED not in await cluster.holds_counted(), await cluster.holds_counted()


class AnsweredLate:
    """The API server's answer to each PATCH of `pod` comes after the pod watch has shown the write, and then
    another writer's -1000."""

    def __init__(self, client: KubeClient, kube: FakeKubeApi, watch: KubePodDiscovery, pod: str) -> None:
        self.client, self.kube, self.watch, self.pod = client, kube, watch, pod

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        await self.client.patch_pod_annotations(namespace, name, annotations)
        if name == self.pod:
            value = annotations[DELETION_COST_ANNOTATION]
            await eventually(lambda: self.watch.deletion_cost(namespace, name) == value)
            annotate(self.kube, name, "-1000")
            await eventually(lambda: self.watch.deletion_cost(namespace, name) == "-1000")


async def test_an_echo_that_comes_before_the_patchs_answer_counts(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """The watch event of the write may come before the PATCH's answer: it is the echo all the same, and the
    -1000 after it another writer's at the next refresh, not the watch's lag for a minute."""
    caplog.set_level(logging.INFO)
    async with watching(kube, ["pod-a", "pod-b"]) as watch:
        clock = SteppedClock()
        writer = DeletionCostWriter(AnsweredLate(kube_client, kube, watch, "pod-a"), AdapterMetrics(),
                                    settings=WriterSettings(qps=None), clock=clock, rand=lambda: 0.5, cluster=watch)
        view = runtime_view([pod_view("pod-a", 900), pod_view("pod-b", 0)], desired=1, current=2)
        for _ in range(2):
            held = writer.misordered(KEY, view, 1, None)
            writer.offer({KEY: view})
            await writer.sync()
            clock.advance(15.0)
        assert held is not None and held.reason == HoldReason.OVERWRITTEN, held
        assert sum(1 for patch in kube.patches if patch.name == "pod-a") == 2
        assert len(foreign_lines(caplog)) == 1, foreign_lines(caplog)


@pytest.mark.parametrize("delay_s", [0.5, 5.0, 14.0])
async def test_a_fast_fighter_is_overwritten_and_said_at_the_first_refresh(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, delay_s: float) -> None:
    """F2: a tool puts -1000 back on the busiest pod `delay_s` after each write, the watch 0.5 s behind, 15 s
    refreshes. e688a124: `queued` ("written, not yet shown by the pod watch") at 3 of 4 refreshes, the line at
    60 s. Now `overwritten` at every refresh after the first write, said at the first, written at its minute."""
    caplog.set_level(logging.INFO)
    clock, names, watch, writer = echoing_writer(kube, kube_client, 10, 0.5)
    view = runtime_view([pod_view(name, 900 if i == 0 else i * 100) for i, name in enumerate(names)],
                        desired=9, current=10)
    fights: list[float] = []
    seen: list[tuple[float, str, int, int]] = []
    t = 0.0
    while t < 150.0:
        if fights and fights[0] <= t:
            fights.pop(0)
            annotate(kube, "p000", "-1000")
        watch.sample()
        if t % 15 == 0:
            held = writer.misordered(KEY, view, 1, None)
            kube.clear_requests()
            writer.offer({KEY: view})
            await writer.sync()
            patched = sum(1 for patch in kube.patches if patch.name == "p000")
            if patched:
                fights.append(t + delay_s)
            seen.append((t, "free" if held is None else str(held.reason), patched, len(foreign_lines(caplog))))
            watch.sample()
        clock.advance(0.5)
        t += 0.5
    assert [reason for at, reason, *_ in seen if at >= 15.0] == ["overwritten"] * 9, seen
    assert seen[1][3] == 1 and seen[-1][3] == 1, seen  # said at 15 s, once
    assert sum(patched for *_, patched, _ in seen) <= 1 + 150.0 / 60.0 + 1, seen


async def test_a_watch_that_shows_none_of_the_writes_is_said_once_and_no_pod_is_written_again(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """F3: the watch connected, delivering nothing. e688a124, 300 pods: 270 PATCHes a minute for 5 minutes, two
    "another writer" lines naming 256 and 14 pods, the hold `overwritten`. Now one line that the watch shows
    none of the writes, nothing written again before the 5-minute rewrite, the hold `queued` saying why; and the
    watch caught up, its echoes end the hold."""
    caplog.set_level(logging.INFO)
    clock, names, watch, writer = echoing_writer(kube, kube_client, 300, 1e7)
    costs = [pod_view(name, (i % 10) * 100) for i, name in enumerate(names)]
    pending, calm = runtime_view(costs, desired=299, current=300), runtime_view(costs)
    per_minute: collections.Counter[int] = collections.Counter()
    reasons: list[tuple[float, str]] = []
    t = 0.0
    while t < 285.0:
        held = writer.misordered(KEY, pending, 1, None)
        reasons.append((t, "free" if held is None else f"{held.reason}: {held.causes[0]}"))
        kube.clear_requests()
        writer.offer({KEY: pending if t < 20.0 else calm})
        await writer.sync()
        per_minute[int(t // 60)] += len(kube.patches)
        clock.advance(15.0)
        watch.sample()
        t += 15.0
    assert per_minute[0] == 270 and sum(per_minute.values()) == 270, per_minute
    behind = [r.getMessage() for r in caplog.records if BEHIND in r.getMessage()]
    assert len(behind) == 1 and r"(behind, or connected but stalled)" in behind[0], behind
    assert foreign_lines(caplog) == []
    assert all(reason.startswith("queued") for _, reason in reasons), reasons
    assert next(reason for at, reason in reasons if at >= ECHO_WAIT_S).endswith("(behind or stalled)"), reasons
    watch.lag = 0.5  # the watch catches up
    clock.advance(1.0)
    watch.sample()
    assert writer.misordered(KEY, pending, 1, None) is None
    assert foreign_lines(caplog) == []


@pytest.mark.parametrize("pods", [300])
async def test_paced_writes_under_a_watch_that_echoes_hold_one_refresh(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, pods: int) -> None:
    """The reviewer's healthy case, with echoes: 300 pods written at 20 a second (15 s), the watch 0.5 s
    behind: the scale-down is held at the refresh that writes them and free at the next; nothing said."""
    caplog.set_level(logging.INFO)
    clock = SteppedClock()
    names = [f"p{i:03d}" for i in range(pods)]
    set_pods(kube, names)
    watch = EchoingWatch(kube, clock, names, 0.5)
    assert isinstance(watch, DeletionCostEvents)

    class Paced:
        async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
            clock.advance(0.05)
            await kube_client.patch_pod_annotations(namespace, name, annotations)
            watch.sample()

    writer = DeletionCostWriter(Paced(), AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 0.5, cluster=watch)
    view = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)],
                        desired=pods - 1, current=pods)
    assert writer.misordered(KEY, view, 1, None) is not None
    writer.offer({KEY: view})
    await writer.sync()
    for _ in range(20):
        clock.advance(0.05)
        watch.sample()
    assert writer.misordered(KEY, view, 1, None) is None
    assert foreign_lines(caplog) == [] and not [r for r in caplog.records if BEHIND in r.getMessage()]


@pytest.mark.parametrize("lag_s", [12.0, 45.0])
async def test_a_lagging_watch_that_echoes_is_no_other_writer_nor_stalled(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, lag_s: float) -> None:
    """As `test_a_lagging_pod_watch_is_no_other_writer`, the watch telling its events `lag_s` late: no line of
    another writer nor of a stalled watch, no pod written twice, the hold over once the echoes come."""
    caplog.set_level(logging.INFO)
    clock, names, watch, writer = echoing_writer(kube, kube_client, 300, lag_s)
    costs = [pod_view(name, (i % 10) * 100) for i, name in enumerate(names)]
    view, calm = runtime_view(costs, desired=299, current=300), runtime_view(costs)
    held = []
    for step in range(12):  # 3 minutes of 15 s refreshes, the scale-down pending throughout
        held.append(writer.misordered(KEY, view, 1, None))
        writer.offer({KEY: view if step < 2 else calm})
        await writer.sync()
        for _ in range(30):
            clock.advance(0.5)
            watch.sample()
    written = collections.Counter(patch.name for patch in kube.patches)
    assert foreign_lines(caplog) == [] and not [r for r in caplog.records if BEHIND in r.getMessage()]
    assert max(written.values()) == 1, [name for name, times in written.items() if times > 1][:5]
    assert held[-1] is None and all(h is None or h.reason == HoldReason.QUEUED for h in held), held
