"""`KubeSession.close` stops its loops even when one goes on after its first cancel (`exporter/stopping.py`).

A cancel that lands as a request's own timeout fires can come out of the HTTP client as that timeout (the
`kubernetes.aio` client over aiohttp did so about one time in twenty on a test whose list never answered): the
loop takes it for a failed request, backs off and lists again, and a `close` that waited for it never returned
(a clean-clone CI run waited 15 minutes in `test_kube_hpas.py`; an adapter shutting down would wait for its
grace period's SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib

from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.kube.session import KubeSession
from tests.support.stubborn import StubbornRequest


async def list_watch_loop(request: StubbornRequest, stopped: list[bool]) -> None:
    """Lists again after a request that failed, as `ListWatch` does."""
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                await request()
    finally:
        stopped.append(True)


async def test_close_stops_a_loop_that_went_on_after_its_first_cancel() -> None:
    session = KubeSession(lambda: ApiClient(Configuration()), "the test's loops")
    await session.open()
    stopped: list[bool] = []
    request = StubbornRequest()
    session.spawn(list_watch_loop(request, stopped), "stubborn")
    await asyncio.wait_for(request.waiting.wait(), timeout=10)
    await asyncio.wait_for(session.close(), timeout=10)
    assert request.took_a_cancel_for_a_timeout
    assert stopped == [True] and not session.running
