"""Waiting in async tests for something a background task will make true."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Return once `condition()` holds; `TimeoutError` after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)
