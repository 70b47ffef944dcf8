"""Stopping background tasks for good, even those that go on after a cancel.

A cancel that lands as an HTTP request's own timeout fires can come out of the client as that timeout (the
`kubernetes.aio` client over aiohttp did so about one time in twenty on a list that never answered): a loop
takes it for a failed request, backs off and tries again, and whoever awaited it after one cancel waited for
ever (a clean-clone CI run waited 15 minutes; an adapter shutting down would wait for its grace period's
SIGKILL). So a task still running a second after its cancel, and no longer cancelled (`Task.cancelling()` is 0:
the client took the cancel back, `Task.uncancel()`, to raise its timeout), is cancelled again, until it ends. A
task still handling its cancel (releasing the Lease on a slow API server, waiting for an NVML call) is left to
finish: cancelling it again would cut that short.

Here, in the exporter, because both programs stop loops around HTTP reads: the exporter its ModelMesh read, the
adapter its refresh, Kubernetes watches and ConfigMap reads (the adapter builds on the exporter's lower parts,
never the other way round).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Final

RECANCEL_AFTER_S: Final = 1.0
"""How long `stop_tasks` waits for a cancelled task before it cancels it again."""


async def stop_tasks(tasks: Iterable[asyncio.Task[Any]], recancel_after_s: float = RECANCEL_AFTER_S) -> None:
    """Cancel `tasks` and return once every one has ended, cancelling again every `recancel_after_s` those
    still running that took their cancel back; what they raised is left unraised (they were being stopped)."""
    stopping = list(tasks)
    pending = set(stopping)
    while pending:
        for task in pending:
            if not task.cancelling():  # not yet cancelled, or it took the cancel back
                task.cancel()
        _, pending = await asyncio.wait(pending, timeout=recancel_after_s)
    await asyncio.gather(*stopping, return_exceptions=True)  # every one ended: collect what they raised
