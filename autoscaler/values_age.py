"""How old the values served are, read at each scrape: `modelmesh_autoscaler_values_age_seconds`.

Every other series of the refresh comes to /metrics as the refresh last wrote it (with each snapshot, in the
serving workers): a refresh that hangs (a deadlock, a stopped process) leaves `leader 1` and
`runtime_values_known 1` on the page for as long as it hangs, nothing on it moving. This gauge is computed by the
side that answers the scrape, from when it last took new values, so it grows from the moment the refresh stops
delivering; `ModelMeshAutoscalerRefreshStalled` alerts on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

VALUES_AGE: str = "modelmesh_autoscaler_values_age_seconds"
_HELP = ("Seconds since the values this replica serves were last replaced by a refresh (before the first, since "
         "the serving side started), read at the scrape: up to about --refresh-interval while the refresh runs, "
         "growing while it is hung or far too slow (its other series then stay as it last wrote them).")
VALUES_STALL_LIMIT: str = "modelmesh_autoscaler_values_stall_limit_seconds"
_STALL_HELP = ("The values' age past which this replica calls its refresh stalled: it answers runtime requests 503 "
               "and fails /livez (--max-staleness, default three refresh intervals, plus one refresh cycle; at least "
               "10 s). ModelMeshAutoscalerRefreshStalled measures the age against it, so that its threshold follows "
               "--refresh-interval.")


class ValuesAge:
    """A collector of the gauge, and beside it the age past which the values count as stalled (`stall_limit_s`,
    `ServeSettings.stalled_after_s`; None: the values are never judged, no such gauge). `updated_at`: the
    `time.monotonic()` at which the values served were last replaced, None before the first
    (`SnapshotStore.updated_at`)."""

    def __init__(self, updated_at: Callable[[], float | None], stall_limit_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._updated_at = updated_at
        self._stall_limit_s = stall_limit_s
        self._clock = clock
        self._started = clock()

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(VALUES_AGE, _HELP)
        if self._stall_limit_s is not None:
            yield GaugeMetricFamily(VALUES_STALL_LIMIT, _STALL_HELP)

    def collect(self) -> Iterator[Metric]:
        updated = self._updated_at()
        now = self._clock()
        yield GaugeMetricFamily(VALUES_AGE, _HELP, value=max(0.0, now - (self._started if updated is None
                                                                          else updated)))
        if self._stall_limit_s is not None:
            yield GaugeMetricFamily(VALUES_STALL_LIMIT, _STALL_HELP, value=self._stall_limit_s)
