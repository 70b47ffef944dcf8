"""What the Prometheus source says and counts of Prometheus failing and answering again (`PrometheusNews`): the
whole backend's outages, the recent-models query's failures, the failing-collectors query's, and its clock.

The failure is logged once per outage with the backend's detail, and again when it recovers; an outage that starts
again for the same reason within FLAP_QUIET_S of the last line is counted, not logged (nor its recovery), and the
next line says how many there were: a backend failing every other refresh wrote two lines a flap. An outage whose
failure changes kind (an HTTP 503, then a 500, then Prometheus's own `timeout` error, then no answer:
`PrometheusSourceError.kind`) says each new kind once, so the log never names a cause gone.

Every failure counted (an outage's, the recent-models query's and the failing-collectors query's, a garbled
last-served time) is counted in `errors` by reason and passed to the optional `on_error` callback (self-metrics).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from autoscaler.sources.prometheus_answers import PrometheusSourceError
from exporter.outage_log import OutageLog

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

FLAP_QUIET_S = 60.0
"""How long after an outage's line a new outage for the same reason is only counted (as the exporter does)."""
_OUTAGE_SERVES = ('every runtime\'s values unknown (503 "metric source down"), the HPAs hold their replicas, '
                  "the last good samples kept")
"""What a failed refresh serves, as its outage lines say it (`decision.SOURCE_DOWN`): not the held samples."""


class PrometheusNews:
    """One source's failures of Prometheus: counted, and said when they start, change and end."""

    def __init__(self, url: str, clock: Callable[[], float], on_error: Callable[[str], None] | None) -> None:
        """`url`: Prometheus's, without a password, as the lines name it."""
        self._url = url
        self._clock = clock
        self._on_error = on_error
        self._models_failing = False  # the models query's failure is logged
        self._clock_off_s = 0.0  # the Prometheus clock offset last logged
        self.errors: Counter[str] = Counter()
        """Failures by reason since start: whole-refresh reasons once per refresh, `garbage` per series."""
        self._outage = OutageLog(FLAP_QUIET_S)
        self.last_error: PrometheusSourceError | None = None
        self._said_kinds: set[str] = set()  # the kinds of failure the current outage's lines said (each once)

    @property
    def outage_since(self) -> float | None:
        """Clock time the current outage began; None while Prometheus answers."""
        return self._outage.since

    def count(self, reason: str) -> None:
        self.errors[reason] += 1
        if self._on_error is not None:
            self._on_error(reason)

    def failed(self, error: PrometheusSourceError) -> None:
        """Log an outage when it starts, unless it is a flap (the same reason within FLAP_QUIET_S of the last
        line); an outage not logged at its start is logged once it has lasted past that minute."""
        self.count(error.reason)
        self.last_error = error
        now = self._clock()
        outage = self._outage
        due = outage.failed(error.reason, now)
        if outage.logged and error.kind not in self._said_kinds:
            self._said_kinds.add(error.kind)
            log.warning("Prometheus at %s now fails otherwise (%s): %s; %s", self._url, error.reason, error.detail,
                        _OUTAGE_SERVES)
            return
        if not due:
            log.debug("Prometheus still failing (%s): %s", error.reason, error.detail)
            return
        more = outage.line_written(error.reason, now)
        log.warning("Prometheus at %s failed (%s): %s; %s until it answers%s",
                    self._url, error.reason, error.detail, _OUTAGE_SERVES, more)
        self._said_kinds = {error.kind}

    def recovered(self) -> None:
        outage = self._outage
        if outage.since is not None:
            down_s = self._clock() - outage.since
            if outage.recovered():
                log.info("Prometheus at %s answers again after %.0f s", self._url, down_s)
            else:
                log.debug("Prometheus answers again after %.0f s (the outage was a flap, not logged)", down_s)
        self.last_error = None

    def note_clock(self, offset_s: float) -> None:
        """Warn when Prometheus's clock is found off (or off by another minute), and say when it is right."""
        if offset_s and (not self._clock_off_s or abs(offset_s - self._clock_off_s) > 60):
            log.warning(
                "Prometheus at %s has a clock %+.0f s off ours (by its answers' evaluation time); reading its "
                "timestamps on our clock: check the time sync of its node or of ours", self._url, offset_s,
            )
        elif not offset_s and self._clock_off_s:
            log.info("Prometheus at %s has a clock that agrees with ours again", self._url)
        self._clock_off_s = offset_s

    def note_models(self, error: PrometheusSourceError | None) -> None:
        """Count every failed models query by its reason (as a failed round's), log the first of a run of them
        and the recovery: pods read meanwhile have no `recent_models`, which only leaves that need term out."""
        if error is None:
            if self._models_failing:
                self._models_failing = False
                log.info("Prometheus at %s answers the recent-models query again", self._url)
            return
        self.count(error.reason)
        if not self._models_failing:
            self._models_failing = True
            log.warning("Prometheus at %s failed the recent-models query (%s): %s; pods have no recent models (the "
                        "unique-copy need term is left out) until it answers", self._url, error.reason, error.detail)
        else:
            log.debug("recent-models query still failing (%s): %s", error.reason, error.detail)

    def note_failing_query(self, error: PrometheusSourceError | None) -> None:
        """The failing ModelMesh collectors' query failed: it only leaves those pods unsaid this refresh, said at
        debug level and counted by its reason (as a failed models query is)."""
        if error is not None:
            self.count(error.reason)
            log.debug("the failing ModelMesh collectors' query failed (%s): %s", error.reason, error.detail)
