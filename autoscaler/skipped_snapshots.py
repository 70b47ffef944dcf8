"""A serving worker's new values skipped for want of files: said once an outage, with why its values age.

At its open-file limit (clients holding many connections open) a worker has no descriptor for the snapshot the
refresh process passes (`packed.SnapshotSkipped`: the kernel drops it). It exited for that once, and the whole
adapter with it: a connection flood stopped the adapter. Now it keeps serving the values it has, and still
acknowledges the snapshot (`serving_worker.SKIPPED`): the refresh process counts unacknowledged snapshots to find
a worker whose event loop is stuck (`WorkerPool.first_hung`), and this one's runs; the acknowledgement comes from
that loop, so a stuck loop still goes unacknowledged. Resending would not help a worker with no file to spare,
and the next refresh sends newer values anyway.

The values age meanwhile. Past the stall limit the worker's stall watch (`autoscaler.api.stall`) refuses them
(503) and fails /readyz and /livez, as for a hung refresh: told why here, it says the worker skipped them, not
that the refresh is hung.

Under a lasting flood a worker takes a snapshot now and then, between batches of connections closing, which ends
an outage, and the next skip starts another: a WARNING and an INFO every ten seconds or so. So outages are logged
as the exporter's readers' are (`exporter.outage_log`): one that starts within `QUIET_S` of the last line is
counted, not said, and the next line says how many.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from autoscaler.api.stall import StallWatch
from exporter.accept_limit import cause_and_cure, shortage
from exporter.outage_log import OutageLog

log = logging.getLogger("autoscaler.workers")  # where the workers' other lines about their snapshots go

HELD_BACK = ("the refresh runs, but this worker skipped its new values for want of files (its log line: cannot "
             "take the refresh process's new values)")
"""Why a stalled worker's values are old (`StallWatch.held_back`), in place of a hung refresh."""

QUIET_S = 60.0
"""An outage starting again within this long of the last line is counted, not said (`OutageLog`)."""
_NO_FILES = "no files"


class SkippedSnapshots:
    """The snapshots one worker skipped since it last took one; says when that starts and when it ends."""

    def __init__(self, where: str, stall: StallWatch | None, clock: Callable[[], float] = time.monotonic) -> None:
        """`where`: the port its clients connect to, for the advice; `stall`: its stall watch, told why the values
        stop coming."""
        self._where = where
        self._stall = stall
        self._clock = clock
        self._skipped = 0
        self._since = 0.0
        self._outages = OutageLog(QUIET_S)

    def skipped(self, error: OSError) -> None:
        """One snapshot skipped for `error` (EMFILE or ENFILE); an outage is said when it starts, or when it lasts
        past `QUIET_S` after the last line."""
        now = self._clock()
        if self._skipped == 0:
            self._since = now
            if self._stall is not None:
                self._stall.held_back = HELD_BACK
        if self._outages.failed(_NO_FILES, now):
            aged = (f"; once they are {self._stall.limit_s:g} s old, answering 503 and failing /readyz and /livez "
                    "as for a hung refresh" if self._stall is not None else "")
            log.warning("%s: cannot take the refresh process's new values (each comes as a file descriptor, which the "
                        "kernel drops for a process with none free): serving the values it has until a file is free "
                        "(said once until then%s)%s: %s", shortage(error), aged,
                        self._outages.line_written(_NO_FILES, now), cause_and_cure(self._where, error))
        self._skipped += 1

    def taken(self) -> None:
        """A snapshot taken: an outage, if there was one, is over (said if it was)."""
        if self._skipped:
            if self._outages.recovered():
                log.info("taking the refresh process's new values again: %d skipped over %.0f s for want of files",
                         self._skipped, self._clock() - self._since)
            self._skipped = 0
            if self._stall is not None:
                self._stall.held_back = None
