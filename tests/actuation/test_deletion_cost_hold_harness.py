"""The hold tests' harness (`Cluster`) itself: a test that holds a PATCH's answer (`hold_answer`) and waits for
the writer's pass without releasing it gets a failure that says so, not a bare "never finished"."""

from __future__ import annotations

import pytest

from tests.actuation.test_deletion_cost_hold import AFTER, Cluster, cluster  # noqa: F401  # the fixture
from tests.support.waiting import eventually


async def test_waiting_for_the_pass_while_a_patch_answer_is_held_fails_naming_the_held_answer(
        cluster: Cluster) -> None:  # noqa: F811
    held = cluster.kube.hold_answer(r"/pods/", times=None, method="PATCH")
    cluster.source.load = AFTER  # a new ranking: pod-a written at its minute
    await cluster.refresh(60.0)
    await eventually(lambda: held.hits > 0)
    try:
        with pytest.raises(AssertionError, match=r"PATCHes? unanswered; the fake API holds the answer to \d+ "
                                                 r"requests? \(hold_answer\): release it"):
            await cluster.written(timeout_s=0.5)
    finally:
        held.release()
    await cluster.written()  # released: the pass finishes
