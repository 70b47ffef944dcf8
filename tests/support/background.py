"""Run a coroutine in a task for the length of a block: a watch loop under test, a busy namespace's changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, object]) -> AsyncIterator[asyncio.Task[object]]:
    """Start `work` as a task; cancel it, and wait for it to stop, when the block ends (whatever it raised)."""
    task = asyncio.create_task(work)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
