"""Edges of the echo rule (s58 review of ab3ce1a5): what proves the pod watch works, a listener that raises inside
discovery's watch, and a term lost and led again under a stalled watch."""

from __future__ import annotations

import asyncio
import collections
import logging

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock, pod_view, runtime_view
from tests.actuation.test_deletion_cost_hold_echo import BEHIND, EchoingWatch, echoing_writer, set_pods
from tests.actuation.test_deletion_cost_hold_foreign_cost import annotate
from tests.actuation.test_deletion_cost_hold_foreign_fights import foreign_lines
from tests.actuation.test_deletion_cost_recreated_pod import LABELS, watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually


async def test_a_ranking_turned_back_to_what_a_stalled_watch_shows_blames_no_pod_on_another_writer(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """100 pods at 500, the watch connected but delivering nothing; at 75 s one pod's ranking goes back to 500, the
    value the stalled watch still shows for it. ab3ce1a5 took finding it there for the watch working up to that
    write: at 90 s 88 pods written again and a line naming them as another writer's."""
    caplog.set_level(logging.INFO)
    clock, names, watch, writer = echoing_writer(kube, kube_client, 100, 1e7)
    first = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)])
    back = runtime_view([pod_view(name, 500 if name == "p001" else (i % 10) * 100) for i, name in enumerate(names)])
    per_refresh: collections.Counter[float] = collections.Counter()
    t = 0.0
    while t < 240.0:
        kube.clear_requests()
        writer.offer({KEY: first if t < 75.0 else back})
        await writer.sync()
        per_refresh[t] = len(kube.patches)
        clock.advance(15.0)
        watch.sample()
        t += 15.0
    assert foreign_lines(caplog) == []
    assert sum(n for at, n in per_refresh.items() if at > 75.0) == 0, per_refresh
    assert len([r for r in caplog.records if BEHIND in r.getMessage()]) == 1


async def test_a_deletion_cost_listener_that_raises_does_not_stop_the_pod_watch(
        kube: FakeKubeApi, caplog: pytest.LogCaptureFixture) -> None:
    """A listener raising on one event (a bug in the writer's echo) made the watch replay that event for good:
    a pod created after it was never seen, its runtime held at the old inventory."""
    caplog.set_level(logging.INFO)
    calls: list[str | None] = []

    def listener(namespace: str, pod: str, annotation: str | None) -> None:
        calls.append(annotation)
        if annotation == "boom":
            raise RuntimeError("a bug in the listener")

    async with watching(kube, ["pod-a", "pod-b"]) as watch:
        watch.on_deletion_cost(listener)
        annotate(kube, "pod-b", "boom")
        await eventually(lambda: "boom" in calls)
        kube.add_pod(KEY.namespace, "pod-d", labels=LABELS)
        await eventually(lambda: KEY in watch.inventory()
                         and "pod-d" in {pod.name for pod in watch.inventory()[KEY].pods})
        await asyncio.sleep(0.3)
    assert calls.count("boom") == 1, calls
    failed = [r for r in caplog.records if "deletion-cost listener failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR


async def test_a_stalled_watch_is_said_again_in_a_new_term(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """Said once in a term, the stalled watch went unsaid when this replica led again while it was still stalled."""
    caplog.set_level(logging.INFO)
    clock = SteppedClock()
    names = [f"p{i:02d}" for i in range(20)]
    set_pods(kube, names)
    watch = EchoingWatch(kube, clock, names, 1e7)
    leading = [True]
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 0.5, cluster=watch, may_write=lambda: leading[0])
    pending = runtime_view([pod_view(name, (i % 10) * 100) for i, name in enumerate(names)], desired=19, current=20)

    async def refreshes(seconds: float) -> None:
        for _ in range(int(seconds // 15)):
            writer.misordered(KEY, pending, 1, None)
            writer.offer({KEY: pending})
            await writer.sync()
            clock.advance(15.0)
            watch.sample()

    def said() -> int:
        return len([r for r in caplog.records if BEHIND in r.getMessage()])

    await refreshes(90)
    assert said() == 1
    leading[0] = False
    await refreshes(30)
    leading[0] = True
    await refreshes(120)
    assert said() == 2
