"""`stop_tasks`: every task stops, one that took its cancel back is cancelled again, and one still handling its
cancel is left to finish (the Lease release, the NVML pass: tests/actuation/test_actuation.py and the GPU
collector's tests show those from outside)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.stopping import stop_tasks
from tests.support.stubborn import StubbornRequest


async def stopped_within(tasks: list[asyncio.Task[None]], seconds: float) -> bool:
    stopping = asyncio.create_task(stop_tasks(tasks, recancel_after_s=0.05))
    done, _ = await asyncio.wait({stopping}, timeout=seconds)  # not `wait_for`: its cancel would stop them
    return stopping in done


async def test_a_loop_that_took_its_first_cancel_for_a_timeout_is_cancelled_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = StubbornRequest()

    async def loop() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await request()

    task = asyncio.create_task(loop(), name="hpa-watch")
    await request.waiting.wait()
    assert await stopped_within([task], 5)
    assert request.took_a_cancel_for_a_timeout and task.cancelled()
    assert "stopping: hpa-watch went on after its cancel (a request took it for its timeout); cancelling it " \
           "again" in caplog.messages


async def test_a_task_whose_cancel_count_leaked_is_still_cancelled() -> None:
    """A count left at 1 by a cancel taken without `uncancel()` (aiohttp before 3.10.8 left one after every
    timed-out request, aio-libs/aiohttp#9326): the task is not being stopped, and must be."""
    swallowed = asyncio.Event()

    async def loop() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()  # and goes on, its count still 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    task.cancel()
    await swallowed.wait()
    assert task.cancelling() == 1
    assert await stopped_within([task], 5)


async def test_cleanup_after_a_cancel_is_not_cut_short(caplog: pytest.LogCaptureFixture) -> None:
    finished: list[str] = []

    async def releases_on_stop() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # six times what the stop waits before looking again
            finished.append("released")
            raise

    task = asyncio.create_task(releases_on_stop())
    await asyncio.sleep(0)
    assert await stopped_within([task], 5)
    assert finished == ["released"]
    assert not caplog.messages  # nothing went on after its cancel


@dataclass(frozen=True)
class Behaviour:
    """How one task meets cancels: the first `takes_back` come out of its request as timeouts (it goes on), and
    the one that gets through has it clean up for `cleanup_s` before it ends; `leaked` cancels were counted
    against it before the stop and never taken back (as aiohttp before 3.10.8 left them)."""

    takes_back: int
    cleanup_s: float
    leaked: int


behaviours = st.builds(Behaviour, takes_back=st.integers(0, 3), cleanup_s=st.sampled_from([0.0, 0.02, 0.05]),
                       leaked=st.integers(0, 2))


async def stop_all(plan: list[Behaviour]) -> tuple[bool, list[bool]]:
    """Start a task per behaviour, leak its cancels, stop them all: whether the stop returned with every task
    ended, and whether each cleaned up."""
    cleaned = [False] * len(plan)
    stopping_now = False

    async def task_body(index: int, behaviour: Behaviour) -> None:
        taken_back = 0
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not stopping_now:
                    continue  # a leaked cancel: absorbed, its count left behind
                task = asyncio.current_task()
                assert task is not None
                if taken_back < behaviour.takes_back:
                    taken_back += 1
                    task.uncancel()  # the request's timeout instead
                    continue
                await asyncio.sleep(behaviour.cleanup_s)  # releasing what it holds
                cleaned[index] = True
                raise

    tasks = [asyncio.create_task(task_body(i, b)) for i, b in enumerate(plan)]
    await asyncio.sleep(0)
    for task, behaviour in zip(tasks, plan, strict=True):
        for _ in range(behaviour.leaked):
            task.cancel()
            await asyncio.sleep(0)
        assert task.cancelling() == behaviour.leaked
    stopping_now = True
    stopping = asyncio.create_task(stop_tasks(tasks, recancel_after_s=0.01))
    done, _ = await asyncio.wait({stopping}, timeout=10)  # not `wait_for`: its cancel would stop them
    return stopping in done and all(task.done() for task in tasks), cleaned


@settings(max_examples=60, deadline=None)
@given(plan=st.lists(behaviours, min_size=1, max_size=4))
def test_every_task_stops_and_none_is_cut_short_in_its_cleanup(plan: list[Behaviour]) -> None:
    stopped, cleaned = asyncio.run(stop_all(plan))
    assert stopped
    assert cleaned == [True] * len(plan)
