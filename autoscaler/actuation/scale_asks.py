"""What the HPA last asked of each runtime, as this replica's RuntimeScale watches see it: part of what runs for a
runtime the adapter has no memory of (`autoscaler.policies.warmup`), on every replica, leader or not.

A watch knows nothing until its first list: until then "no RuntimeScale" and "not listed yet" look alike, and a
runtime seeded then started from its Deployment alone, below a scale-up the HPA had asked for and nobody had
carried yet (a leader handover). So each runtime also asks whether the watch of its namespace has settled:
listed, or failed to (then it never will know, and says so in the log), and waits for it while warming up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.model import RuntimeKey


class RuntimeScaleAsks:
    """The RuntimeScales' `spec.replicas` by runtime, over the watches of the bridge's scopes (namespaces, or one
    watch of all): the refresher's `scale_asks`."""

    def __init__(self, watches: Sequence[RuntimeScaleWatch]) -> None:
        self._watches = tuple(watches)

    def replicas_for(self, key: RuntimeKey) -> int | None:
        """What the HPA last asked for runtime `key` (its RuntimeScale's `spec.replicas`), if a watch has seen it."""
        found = [replicas for watch in self._watches if (replicas := watch.replicas_for(key)) is not None]
        return max(found) if found else None

    def settled_for(self, key: RuntimeKey) -> bool:
        """Whether `replicas_for(key)` says what it can: every watch that covers the runtime's namespace has listed
        (or failed to). True where none covers it (a runtime outside the bridge's namespaces): nothing to wait
        for. Watches of other namespaces do not hold it up."""
        return all(watch.settled for watch in self._watches if watch.scope in (None, key.namespace))

    async def wait_settled(self, timeout_s: float) -> bool:
        """Wait until every watch has listed (or failed to), at most `timeout_s`; whether they all have."""
        try:
            async with asyncio.timeout(timeout_s):
                for watch in self._watches:
                    await watch.wait_settled()
        except TimeoutError:
            return False
        return True
