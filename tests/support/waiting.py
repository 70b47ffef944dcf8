"""Waiting in async tests for something a background task will make true."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Return once `condition()` holds; `TimeoutError` after `timeout` seconds.

    The default is generous because it costs nothing where the condition comes true (the wait ends then) and a
    2-core CI machine running six test files at once can stall a background task for seconds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)
