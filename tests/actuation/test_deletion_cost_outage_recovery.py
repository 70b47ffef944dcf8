"""After an outage of the Kubernetes API, a deletion cost the ranking changed during it reaches its pod within
seconds of the API's return, as the replica bridge's writes and the watches do
(tests/actuation/test_bridge_outage_recovery.py).

Before, the writer's retries of a pod backed off 1 s doubling to its 60 s cap whatever the failure: a cost changed
during a 40 s outage of unanswered PATCHes stayed stale on the pod 23 s after the server was back (up to the cap
after a longer outage), and a 503 at the return (an API server still starting) waited 60 s, the refused tries
counted into its backoff. Meanwhile the ReplicaSet reads the old cost: a scale-down removes the pod that just got
busy. A failure the server never answered backs off to about 4 s only (`autoscaler.kube.backoff.UNANSWERED_MAX_S`),
an answered one by the answered failures in a row alone (`backoff.FailuresInARow`).

Played on the test's clock (the writer's retries one after another, each when it falls due), jitter drawn at its
top: no wall-clock window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.errors import KubeApiError
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock, add_pods, connected, views_of
from tests.actuation.test_deletion_cost_foreign_edit_property import WatchedPods
from tests.actuation.test_deletion_cost_recreated_pod import cost_on
from tests.fakes.kube import FakeKubeApi

OUTAGE_S = 40.0
PROMPT_S = 5.0
"""How soon after the API's return the changed cost is on the pod: the longest wait after a PATCH with no answer
(4 s, jitter at its top), and some slack."""
FIRST_ANSWERED_S = 1.0
"""The wait after the server's first answer at its return where that is a failure (a 503 of an API server still
starting): the first answered failure's, the writer's base backoff, not the step the tries nobody answered had
doubled to (the 60 s cap)."""
BEFORE = {"pod-a": 900, "pod-b": 300}
TURNED = {"pod-a": 100, "pod-b": 300}
"""pod-a, the least needed before the outage, is the busiest now: its 900 must go before a scale-down."""


def pod_a_retry_at(writer: DeletionCostWriter) -> float:
    return writer.records[(KEY.namespace, "pod-a")].retry_at


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_a_cost_changed_during_an_outage_lands_within_seconds_of_the_api_s_return(
        kube: FakeKubeApi, answers_first: int | None) -> None:
    """pod-a's PATCHes are held unanswered past the client's 0.3 s timeout for 40 s (never applied while the test
    looks); the server's first answer after it may be a 503."""
    add_pods(kube, list(TURNED))
    async with connected(kube, KEY.namespace, timeout_s=0.3) as client:
        clock = SteppedClock()
        writer = DeletionCostWriter(client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                    rand=lambda: 1.0)
        writer.offer(views_of(BEFORE))
        await writer.sync()
        assert cost_on(kube, "pod-a") == "900"

        clock.advance(60.0)  # the pod's minute has passed: a changed cost goes out at once
        outage = kube.hold_answer(r"/pods/pod-a$", times=None, method="PATCH")
        try:
            writer.offer(views_of(TURNED))
            await writer.sync()
            end, down = clock.now + OUTAGE_S, True
            while cost_on(kube, "pod-a") != "100":
                clock.advance(max(0.0, pod_a_retry_at(writer) - clock.now))
                if down and clock.now >= end:
                    kube.held_answers.remove(outage)  # the server answers again; what it never answered is lost
                    if answers_first is not None:
                        kube.fail(r"/pods/pod-a$", answers_first, method="PATCH")
                    down = False
                writer.offer(views_of(TURNED))
                await writer.sync()
                assert clock.now < end + 120, "pod-a's new cost never landed"
            tries = outage.hits
        finally:
            outage.release()
    assert tries >= 2, f"{tries} unanswered tries: the outage did not hold pod-a's writes"
    late_s = PROMPT_S + (0.0 if answers_first is None else FIRST_ANSWERED_S)
    assert clock.now - end <= late_s, (
        f"pod-a carried its stale 900 for {clock.now - end:.1f} s after the server answered again")


class DownPods(WatchedPods):
    """The pods, and an API server that answers no PATCH until `back_at` on `clock`, then `answers_first` (a
    status each) before it writes."""

    def __init__(self, clock: SteppedClock, back_at: float, answers_first: list[int]) -> None:
        super().__init__()
        self.clock = clock
        self.back_at = back_at
        self.answers_first = answers_first

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        if self.clock.now < self.back_at:
            raise KubeApiError(f"PATCH pods/{name}: connection refused", status=None)
        if self.answers_first:
            raise KubeApiError(f"PATCH pods/{name}: {self.answers_first[0]}", status=self.answers_first.pop(0))
        await super().patch_pod_annotations(namespace, name, annotations)


async def stale_after_return(outage_s: float, answers_first: list[int], jitter: float) -> float:
    """How long after the API's return pod-a still carried its old cost."""
    clock = SteppedClock(1_700_000_000.0)
    pods = DownPods(clock, back_at=-1.0, answers_first=[])
    writer = DeletionCostWriter(pods, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: jitter, cluster=pods)
    writer.offer(views_of(BEFORE))
    await writer.sync()
    clock.advance(60.0)
    pods.back_at, pods.answers_first = clock.now + outage_s, list(answers_first)
    writer.offer(views_of(TURNED))
    await writer.sync()
    while pods.costs.get("pod-a") != "100":
        clock.advance(max(0.0, pod_a_retry_at(writer) - clock.now))
        writer.offer(views_of(TURNED))
        await writer.sync()
        assert clock.now < pods.back_at + 600, "pod-a's new cost never landed"
    return max(0.0, clock.now - pods.back_at)


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 600.0), st.sampled_from([[], [503], [500], [409], [503, 503]]), st.floats(0.0, 0.999))
@example(OUTAGE_S, [503], 0.999)  # the test above, in the stand-in
def test_whatever_the_outage_a_changed_cost_lands_within_seconds_of_the_return(
        outage_s: float, answers_first: list[int], jitter: float) -> None:
    """Promise (docs/design.md): a write the server never answered is tried again within about 4 s, so however long
    the outage it lands within seconds of the server's return; each answered failure then waits its own backoff
    from 1 s (1 s, then 2 s), not the step the outage's unanswered tries had reached."""
    answered_waits_s = {0: 0.0, 1: 1.0, 2: 1.0 + 2.0}[len(answers_first)]
    assert asyncio.run(stale_after_return(outage_s, answers_first, jitter)) <= PROMPT_S + answered_waits_s
