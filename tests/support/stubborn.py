"""A request that takes its first cancel for its own timeout, as an HTTP client can.

A cancel that lands as a request's timeout fires can come out of the client as that timeout (the
`kubernetes.aio` client over aiohttp did so about one time in twenty): the caller sees a failed request, not a
cancel, and a loop around it backs off and goes on. `exporter/stopping.py` stops such loops; the tests of each
stop path give the loop behind it this request."""

from __future__ import annotations

import asyncio


class StubbornRequest:
    """A request to a server that never answers. The first cancel it gets comes out as `TimeoutError`, the
    task no longer cancelled; later ones are cancels (the coincidence is rare)."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.took_a_cancel_for_a_timeout = False

    async def __call__(self) -> None:
        self.waiting.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if self.took_a_cancel_for_a_timeout:
                raise
            self.took_a_cancel_for_a_timeout = True
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            raise TimeoutError("the request timed out") from None
