"""The write fence's promise (autoscaler.actuation.write_fence): `drain()` says "all answered" exactly when every
write in flight at its start ended with an answer from the API server (a success or an error status), so that
the Lease is released only when no write of the term can land later. Writes answered before the drain do not
count; a write cancelled, timed out or still in flight at the bound does, and so does one that ended unanswered
within the bound before the drain (it may still be in the API server)."""

from __future__ import annotations

import asyncio
import contextlib

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.actuation.write_fence import WriteFence
from autoscaler.kube.errors import KubeApiError

ENDED = ["ok", "refused", "no answer", "cancelled"]
ANSWERED = {"ok", "refused"}


def end(outcome: str, call: asyncio.Future[None], write: asyncio.Task[None]) -> None:
    if outcome == "ok":
        call.set_result(None)
    elif outcome == "refused":
        call.set_exception(KubeApiError("PATCH pod: 403 forbidden", 403, "Forbidden"))
    elif outcome == "no answer":
        call.set_exception(KubeApiError("PATCH pod: no answer: TimeoutError()"))
    elif outcome == "cancelled":
        write.cancel()


async def scenario(before: list[str], during: list[str]) -> tuple[bool, bool]:
    """(what drain said, whether any write was still in flight when it returned)."""
    fence = WriteFence()
    loop = asyncio.get_running_loop()
    writes: list[tuple[str, asyncio.Future[None], asyncio.Task[None]]] = []
    for outcome in before + during:
        call: asyncio.Future[None] = loop.create_future()
        writes.append((outcome, call, asyncio.ensure_future(fence.write(call))))
    await asyncio.sleep(0)  # every write is in flight
    for outcome, call, write in writes[: len(before)]:
        end(outcome, call, write)
    await asyncio.sleep(0)
    pending = "in flight" in during
    draining = asyncio.ensure_future(fence.drain(0.01 if pending else 60.0))
    await asyncio.sleep(0)
    assert not fence.open, "no write may start once the drain began"
    for outcome, call, write in writes[len(before):]:
        end(outcome, call, write)
    said = await draining
    still = fence.in_flight > 0
    for _, _, write in writes:
        write.cancel()
        with contextlib.suppress(BaseException):
            await write
    return said, still


@given(before=st.lists(st.sampled_from(ENDED), max_size=5),
       during=st.lists(st.sampled_from([*ENDED, "in flight"]), max_size=6))
def test_drain_says_all_answered_only_when_every_write_in_flight_was_answered(
    before: list[str], during: list[str]
) -> None:
    said, still = asyncio.run(scenario(before, during))

    assert said == all(outcome in ANSWERED for outcome in before + during)  # "before": a moment before
    assert still == ("in flight" in during)


def test_a_write_unanswered_long_before_the_drain_does_not_hold_the_lease() -> None:
    """Worked by hand: bound 2.5 s. A write timed out at t=0; a drain at t=2 must not release (the write was
    sent at most 2.5 s before it timed out, and the API server may apply it still); a drain at t=3 may."""

    async def drained_at(drain_at: float) -> bool:
        now = [0.0]
        fence = WriteFence(clock=lambda: now[0])

        async def timed_out() -> None:
            raise KubeApiError("PATCH servingruntime: no answer: TimeoutError()")

        with contextlib.suppress(KubeApiError):
            await fence.write(timed_out())
        now[0] = drain_at
        return await fence.drain(2.5)

    assert asyncio.run(drained_at(2.0)) is False
    assert asyncio.run(drained_at(3.0)) is True
