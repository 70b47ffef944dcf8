"""`KubeSession.close` stops its loops even when one goes on after its first cancel (`autoscaler/stopping.py`).

A cancel that lands as a request's own timeout fires can come out of the HTTP client as that timeout (the
`kubernetes.aio` client over aiohttp did so about one time in twenty on a test whose list never answered): the
loop takes it for a failed request, backs off and lists again, and a `close` that waited for it never returned
(a clean-clone CI run waited 15 minutes in `test_kube_hpas.py`; an adapter shutting down would wait for its
grace period's SIGKILL)."""

from __future__ import annotations

import asyncio

from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.kube.session import KubeSession


async def loop_that_takes_its_first_cancel_for_a_timeout(stopped: list[bool]) -> None:
    swallowed = False
    try:
        while True:
            try:
                await asyncio.sleep(0.05)  # a request
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed = True
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()  # what the client's timeout does with a cancel it takes for its own
    finally:
        stopped.append(True)


async def test_close_stops_a_loop_that_went_on_after_its_first_cancel() -> None:
    session = KubeSession(lambda: ApiClient(Configuration()), "the test's loops")
    await session.open()
    stopped: list[bool] = []
    session.spawn(loop_that_takes_its_first_cancel_for_a_timeout(stopped), "stubborn")
    await asyncio.sleep(0.1)
    await asyncio.wait_for(session.close(), timeout=10)
    assert stopped == [True] and not session.running
