"""How long an exporter may publish no rates before the scrape source says so.

An exporter publishes its windowed rates from its second ModelMesh read on, so a new or restarted one has none
for one read interval, and its pod is rightly held as not fresh yet, unsaid. That silence must end: an exporter
whose reads work but whose rates never come (ModelMesh restarting at every read, reads further apart than its
load window) would otherwise hold its runtime (a Ready pod stale: no scale-down) with nothing in /debug or the log.
The adapter does not know the exporter's --modelmesh-interval, so the bound is counted in the exporter's own
reads, which its `last_success_timestamp_seconds{collector="modelmesh"}` shows moving: its first, and two more
(a couple of intervals; a ModelMesh restart between the first two is allowed for), seen across refreshes.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import Final

READS_WITHOUT_RATES: Final = 3
"""Distinct ModelMesh reads an exporter may show with no rates before it is said: a healthy one has a rate at
its second."""


class PendingRates:
    """Each pod's distinct ModelMesh read times seen while its exporter published no rates, until it has one."""

    def __init__(self) -> None:
        self._reads: dict[Hashable, set[float]] = {}

    def overdue(self, pod: Hashable, read_at: float | None) -> int | None:
        """Note a scrape of `pod` with no rates whose exporter last read ModelMesh at `read_at` (None: not yet);
        the reads counted so far once they reach `READS_WITHOUT_RATES`, else None (still within the wait)."""
        if read_at is None:
            return None
        reads = self._reads.setdefault(pod, set())
        if len(reads) < READS_WITHOUT_RATES:
            reads.add(read_at)
        return len(reads) if len(reads) >= READS_WITHOUT_RATES else None

    def ended(self, pod: Hashable) -> None:
        """The pod's exporter published rates, or another answer than one without them: its count starts again."""
        self._reads.pop(pod, None)

    def forget_all_but(self, pods: Collection[Hashable]) -> None:
        """Drop the pods no longer listed (`pods`: the listed ones, a set at fleet size). Nearly always nothing
        is kept: then the listed pods are not looked at."""
        for pod in [pod for pod in self._reads if pod not in pods]:
            del self._reads[pod]
