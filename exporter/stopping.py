"""Stopping background tasks for good, even those that go on after a cancel.

A cancel that lands as an HTTP request's own timeout fires can come out of the client as that timeout (the
`kubernetes.aio` client over aiohttp did so about one time in twenty on a list that never answered): a loop
takes it for a failed request, backs off and tries again, and whoever awaited it after one cancel waited for
ever (a clean-clone CI run waited 15 minutes; an adapter shutting down would wait for its grace period's
SIGKILL). So a task still running a second after its cancel, and whose cancel was taken back (`Task.cancelling()`
below what it was after the cancel: the client's `Task.uncancel()` as it raised its timeout), is cancelled again,
until it ends. A task still handling its cancel (releasing the Lease on a slow API server, waiting for an NVML
call) is left to finish: cancelling it again would cut that short. That relies on clients taking back the cancels
they turn into timeouts: aiohttp does from 3.10.8 (before, every timeout left one behind, aio-libs/aiohttp#9326),
hence the floor in pyproject.toml.

Here, in the exporter, because both programs stop loops around HTTP reads: the exporter its ModelMesh read, the
adapter its refresh, Kubernetes watches and ConfigMap reads (the adapter builds on the exporter's lower parts,
never the other way round).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, Final

log = logging.getLogger(__name__)

RECANCEL_AFTER_S: Final = 1.0
"""How long `stop_tasks` waits for a cancelled task before it cancels it again."""


async def stop_tasks(tasks: Iterable[asyncio.Task[Any]], recancel_after_s: float = RECANCEL_AFTER_S) -> None:
    """Cancel `tasks` and return once every one has ended, cancelling again every `recancel_after_s` those
    still running that took their cancel back; what they raised is left unraised (they were being stopped)."""
    stopping = list(tasks)
    cancels: dict[asyncio.Task[Any], int] = {}  # each task's count of cancels just after ours
    pending = set(stopping)
    while pending:
        for task in pending:
            if task not in cancels or task.cancelling() < cancels[task]:  # ours not sent yet, or taken back
                if task in cancels:
                    log.warning("stopping: %s went on after its cancel (a request took it for its timeout); "
                                "cancelling it again", task.get_name())
                task.cancel()
                cancels[task] = task.cancelling()
        _, pending = await asyncio.wait(pending, timeout=recancel_after_s)
    await asyncio.gather(*stopping, return_exceptions=True)  # every one ended: collect what they raised
