"""Per-collector health: did the last collection work, when did one last work, and why it failed.

Every collector reports through one `CollectorHealth` so the self-metrics in docs/design.md are produced in one
place and a failure is logged once per outage, not once per scrape (again only for a new reason, a cause beneath it
the outage's lines have not named, or a new problem at most once a minute). Besides success, freshness and errors it
publishes how long each collector's last attempt took (node_exporter's `scrape_collector_duration_seconds`): a
ModelMesh that answers ever closer to the timeout shows there before it starts failing.

It also publishes the exporter's clock at each scrape (node_exporter's `node_time_seconds`). The success
timestamps are on the node's clock, and the adapter judges freshness on its own: on a node whose clock is a
minute behind, every sample would look a minute old, the pod stale for good, and its runtime never allowed to
scale down. With the clock beside them, a reader takes the timestamps' age on the exporter's own clock.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names
from exporter.outage_log import OutageLog

log = logging.getLogger(__name__)


@dataclass
class _State:
    outage: OutageLog
    success: bool = False
    last_success: float | None = None
    logged_detail: str | None = None  # what the last failure line said
    causes_said: dict[str, float] = field(default_factory=dict)
    """When a failure line last named each cause (NVML's error codes)."""
    outage_causes: set[str] = field(default_factory=set)
    """The causes the lines of the outage going on named."""
    errors: Counter[str] = field(default_factory=Counter)
    duration_s: float | None = None


class CollectorHealth(Collector):
    """Records outcomes of each named collector and publishes them as self-metrics."""

    RELOG_AFTER_S = 60.0
    """During an outage, a failure that says something new is logged at most this often."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._states: dict[str, _State] = {}

    def register(self, collector: str) -> None:
        """Make a collector's series appear before its first attempt: success 0, and its failures at 0 for each
        reason it counts (`names.COLLECTOR_REASONS`), so that a rate over them sees the first failure."""
        errors = self._state(collector).errors
        for reason in names.COLLECTOR_REASONS.get(collector, ()):
            errors.setdefault(reason, 0)

    def _state(self, collector: str) -> _State:
        state = self._states.get(collector)
        if state is None:
            state = self._states[collector] = _State(OutageLog(self.RELOG_AFTER_S))
        return state

    def succeeded(self, collector: str, as_of: float | None = None, news: str | None = None) -> None:
        """Record a good collection; `as_of` is the time its values describe, when that is not now (on this
        clock): a GPU pass held by a hung NVML call ends seconds after the samples it serves were read, and a
        success stamped at its end would pass them off as that much fresher.

        `news` is what else this collection has to say (ModelMesh restarted, or no good reading for longer than
        the load window): in the `recovered` line when it ends a logged outage, one line for what happened at one
        read, else a line of its own."""
        state = self._state(collector)
        if state.outage.recovered():
            log.info("%s collector recovered%s", collector, f"; {news}" if news else "")
        elif news:
            log.info("%s", news)
        state.success = True
        state.last_success = self._clock() if as_of is None else as_of

    def failed(self, collector: str, reason: str, detail: str, *, served: str = "keeping last good values",
               causes: Iterable[str] = ()) -> None:
        """Count a failure; log it when the outage starts or its reason changes, with what is `served`
        meanwhile (the ModelMesh collector keeps its last values; the GPU collector serves only the GPUs that
        answered), and when what it says changes, at most once every `RELOG_AFTER_S`: a GPU lost while MIG
        devices already failed the collector (reason nvml for good) must show in the log, and a detail that
        changes at every pass must not log at every pass.

        An outage that starts again for the same reason within `RELOG_AFTER_S` of the last line is counted,
        not logged (nor its recovery): a ModelMesh failing every other read logged two lines a flap, some
        17,000 a day a pod. The next line says how many there were; one that lasts is logged after the minute
        (`OutageLog`).

        `causes` name what failed beneath the reason (the GPU collector's NVML error codes, all reason `nvml`): in
        an outage that has had its line, one that no line of the outage has named gets its line at once (a GPU
        lost, then the driver gone, Driver Not Loaded, 5 s later, went unsaid: the next line was the recovery);
        in one that has not (a flap, counted for the next line), one that no line of the last `RELOG_AFTER_S`
        named. So codes taking turns at every pass get a line each an outage, and a line each a minute across
        flaps, never a line a pass."""
        state = self._state(collector)
        state.success = False
        state.errors[reason] += 1
        now = self._clock()
        outage = state.outage
        if outage.since is None:
            state.outage_causes.clear()
        new_outage = outage.failed(reason, now)
        named = frozenset(causes)
        news = any(cause not in state.outage_causes and (
            outage.logged or now - state.causes_said.get(cause, -math.inf) >= self.RELOG_AFTER_S) for cause in named)
        if new_outage or news or (outage.logged and (reason != outage.logged_reason or (
                not outage.recent(now) and detail != state.logged_detail))):
            more = outage.line_written(reason, now)
            log.warning("%s collector failed (%s): %s; %s%s", collector, reason, detail, served, more)
            state.logged_detail = detail
            state.outage_causes.update(named)
            state.causes_said.update(dict.fromkeys(named, now))

    def observe_duration(self, collector: str, seconds: float) -> None:
        """Record how long the collector's last attempt took, successful or not."""
        self._state(collector).duration_s = seconds

    def is_healthy(self, collector: str) -> bool:
        state = self._states.get(collector)
        return state is not None and state.success

    def last_success(self, collector: str) -> float | None:
        state = self._states.get(collector)
        return None if state is None else state.last_success

    def describe(self) -> Iterable[Metric]:
        """The families `collect` yields, by name, for the registry's `name[]` filter (see ModelMeshCollector)."""
        for name in (names.COLLECTOR_SUCCESS, names.LAST_SUCCESS_TIMESTAMP, names.COLLECTOR_DURATION_SECONDS,
                     names.EXPORTER_TIME):
            yield GaugeMetricFamily(name, "")
        yield CounterMetricFamily(names.SCRAPE_ERRORS_TOTAL, "")

    def collect(self) -> Iterable[Metric]:
        success = GaugeMetricFamily(
            names.COLLECTOR_SUCCESS, "1 if the last collection by this collector worked, else 0.",
            labels=["collector"],
        )
        last = GaugeMetricFamily(
            names.LAST_SUCCESS_TIMESTAMP,
            "Unix time of the last successful collection; it does not move while collection fails. For gpu, the "
            "time its busy ratios describe (when NVML's samples were read), not when the pass ended.",
            labels=["collector"],
        )
        errors = CounterMetricFamily(
            names.SCRAPE_ERRORS_TOTAL, names.SCRAPE_ERRORS_HELP,
            labels=["collector", "reason"],
        )
        duration = GaugeMetricFamily(
            names.COLLECTOR_DURATION_SECONDS,
            "Seconds the last collection attempt took, successful or not (background work, not this scrape).",
            labels=["collector"],
        )
        clock = GaugeMetricFamily(
            names.EXPORTER_TIME,
            "The exporter's clock at this scrape, in Unix seconds (as node_exporter's node_time_seconds): readers "
            "take the last-success timestamps' age on this clock, so a node clock that is off does not make its "
            "data look stale or fresh.",
            value=self._clock(),
        )
        for collector, state in sorted(self._states.items()):
            success.add_metric([collector], 1.0 if state.success else 0.0)
            if state.last_success is not None:
                last.add_metric([collector], state.last_success)
            for reason, count in sorted(state.errors.items()):
                errors.add_metric([collector, reason], float(count))
            if state.duration_s is not None:
                duration.add_metric([collector], state.duration_s)
        yield success
        yield last
        yield errors
        yield duration
        yield clock
