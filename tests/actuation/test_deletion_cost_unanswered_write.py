"""A deletion-cost PATCH that gets no answer in time but lands on the pod after all (an API server slow to
commit): the pod watch then shows the leader's own value. The writer knew only the value written before, took
this one for another writer's, and said so at INFO ("carry a cost another writer set after this replica's ...:
ml/pod-a (100)"), sending the user to look for a `kubectl annotate` or a tool that does not exist, and damped the
pod's later writes to its minute as for a writer that fights. Real discovery watches the fake Kubernetes API;
the writer's client gives up after half a second."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeApiError
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, connected, views_of
from tests.actuation.test_deletion_cost_foreign_edit_property import (
    PODS,
    RANKING,
    REFRESH_S,
    SETTINGS,
    STEP_S,
    WatchedPods,
)
from tests.actuation.test_deletion_cost_hold_foreign_cost import annotate
from tests.actuation.test_deletion_cost_hold_foreign_fights import foreign_lines
from tests.actuation.test_deletion_cost_recreated_pod import cost_on, watching
from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.faults import HeldAnswer
from tests.support.log_lines import catching
from tests.support.waiting import eventually

FIRST = {"pod-a": 900, "pod-b": 300}
TURNED = {"pod-a": 100, "pod-b": 300}


@asynccontextmanager
async def held_write(kube: FakeKubeApi) -> AsyncIterator[
        tuple[KubePodDiscovery, DeletionCostWriter, SteppedClock, HeldAnswer]]:
    """The leader's costs FIRST on the pods, then, a minute later, its PATCH of pod-a for TURNED held by the API
    server past the client's 0.5 s timeout (the writer has given up on it): the held answer, to release."""
    async with watching(kube, list(FIRST)) as watch, connected(kube, KEY.namespace, timeout_s=0.5) as client:
        clock = SteppedClock()
        writer = DeletionCostWriter(client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                    rand=lambda: 0.5, cluster=watch)
        writer.offer(views_of(FIRST))
        await writer.sync()
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "900")

        clock.advance(60.0)
        slow = kube.hold_answer(r"/pods/pod-a$", method="PATCH")
        writer.offer(views_of(TURNED))
        await writer.sync()
        yield watch, writer, clock, slow


async def test_a_write_that_got_no_answer_and_landed_later_is_no_other_writers(
        kube: FakeKubeApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with held_write(kube) as (watch, writer, clock, slow):
        assert cost_on(kube, "pod-a") == "900", "the PATCH is still held when the client gives up"
        slow.release()  # the API server commits it after all
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "100")
        for _ in range(4):  # a minute of refreshes, the ranking still
            clock.advance(15.0)
            writer.offer(views_of(TURNED))
            await writer.sync()
        assert foreign_lines(caplog) == []
        assert cost_on(kube, "pod-a") == "100"


async def test_another_writers_value_after_a_write_that_got_no_answer_is_still_another_writers(
        kube: FakeKubeApi, caplog: pytest.LogCaptureFixture) -> None:
    """What the leader sent without an answer is its own only where the pod carries that very value: a hand edit
    after it is written over at the pod's next pass, and said."""
    caplog.set_level(logging.INFO)
    async with held_write(kube) as (watch, writer, clock, slow):
        slow.release()
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "100")
        annotate(kube, "pod-a", "-1000")
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")
        clock.advance(15.0)
        writer.offer(views_of(TURNED))
        await writer.sync()
        assert cost_on(kube, "pod-a") == "100"
        assert [line for line in foreign_lines(caplog) if "ml/pod-a (-1000)" in line], foreign_lines(caplog)


class SlowToCommit(WatchedPods):
    """The pods and their watch, and an API server whose answer to each PATCH is drawn: answered; no answer and
    not committed; no answer and committed (at once, or that many steps later, but before a later PATCH of the
    pod: one committed after a later write of the pod leaves a stale cost, written again as another writer's)."""

    def __init__(self, fates: list[int | None]) -> None:
        super().__init__()
        self.fates = fates  # per PATCH in order: None answered, -1 lost, n >= 0 committed n steps later unanswered
        self.later: list[tuple[int, str, str]] = []

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        fate = self.fates.pop(0) if self.fates else None
        value = annotations[DELETION_COST_ANNOTATION]
        for _, pod, late in [entry for entry in self.later if entry[1] == name]:
            self.set(pod, late)
        self.later = [entry for entry in self.later if entry[1] != name]
        if fate is None:
            self.set(name, value)
            return
        if fate == 0:
            self.set(name, value)
        elif fate > 0:
            self.later.append((fate, name, value))
        raise KubeApiError(f"PATCH pods/{name}: no answer", status=None)

    def step(self) -> None:
        """A step of the clock: the commits due land."""
        due = [(steps - 1, name, value) for steps, name, value in self.later]
        self.later = [entry for entry in due if entry[0] > 0]
        for _, name, value in [entry for entry in due if entry[0] == 0]:
            self.set(name, value)


async def unanswered(rankings: list[tuple[int, ...]], fates: list[int | None]) -> list[str]:
    """The writer's "another writer" lines over `rankings`, one a refresh, under the PATCH `fates` drawn, and then
    quiet refreshes until every pod carries the leader's cost."""
    clock = SteppedClock(1_700_000_000.0)
    pods = SlowToCommit(fates)
    writer = DeletionCostWriter(pods, AdapterMetrics(), settings=SETTINGS, clock=clock, rand=lambda: 0.5,
                                cluster=pods)
    with catching("autoscaler.actuation.deletion_cost") as said:
        ranked: dict[str, int] = {}
        for ranking in [*rankings, *[rankings[-1]] * round(SETTINGS.max_interval_s / REFRESH_S)]:
            ranked = dict(zip(PODS, ranking, strict=True))
            writer.offer(views_of(ranked))
            await writer.sync()
            for _ in range(round(REFRESH_S / STEP_S)):
                clock.advance(STEP_S)
                pods.step()
    assert pods.costs == {pod: str(cost) for pod, cost in ranked.items()}
    return [line for line in said.lines if "carry a cost another writer set" in line]


FATES = st.lists(st.none() | st.sampled_from([-1, 0, 1, 4, 40, 200]), max_size=30)


@settings(max_examples=100, deadline=None)
@given(st.lists(RANKING, min_size=1, max_size=12), FATES)
@example([(900, 500, 0), (100, 500, 0)], [None, None, None, 0])  # the test above, in the stand-in
# The wanted cost 100 -> 0 -> 100 while the PATCH of 0 goes unanswered and lands late: a pod carrying 100 again
# is not settled while that PATCH may still land (found in CI against 6027899c, since reverted).
@example([(100, 0, 0), (0, 0, 0), (100, 0, 0)], [0, None, None, 40])
def test_no_write_of_the_leaders_own_answered_or_not_is_said_as_another_writers(
        rankings: list[tuple[int, ...]], fates: list[int | None]) -> None:
    assert asyncio.run(unanswered(rankings, fates)) == []
