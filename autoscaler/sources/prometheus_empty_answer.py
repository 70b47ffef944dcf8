"""An answer with no series for any known pod, right after answers that had them: held, not an outage.

Behind a Service in front of an HA pair, a replica restarted with an empty TSDB (kube-prometheus-stack without
storage keeps it in an emptyDir) answers every query it gets with nothing until its first scrapes: discovery
time plus a scrape interval. Declared an outage, that made every runtime's value 503 "metric source down" on
the refreshes that reached it, and the log sent the operator to check scrape configs, which were fine. A
`--query.lookback-delta` shorter than the scrape interval gives the same empty answers between scrapes.

So after a good round the source asks once more at once (a load balancer may send it to the other replica),
and if that is empty too it holds every pod's last sample: the round is not an outage, the samples age as in
any gap and turn stale after `max_staleness_s` (values may then rise but never fall), and the log names the
likely causes beside the old hint. A Prometheus that never answered with series keeps the outage and its
message: there the scrape configuration is the likely cause.
"""

from __future__ import annotations

import logging
from typing import Final

from autoscaler.sources.prometheus_answers import REASON_EMPTY, PrometheusSourceError
from exporter.outage_log import OutageLog

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

LIKELY_CAUSES: Final = (
    "most likely a Prometheus replica with an empty TSDB (restarted without persistent storage) behind the "
    "Service or load balancer that --prometheus-url names, until its first scrapes; or Prometheus's "
    "--query.lookback-delta shorter than the exporters' scrape interval (keep it above the interval)"
)


class EmptyAfterGood:
    """Whether an empty answer is held rather than an outage, and the log lines of a run of held ones."""

    def __init__(self, url: str, quiet_s: float) -> None:
        self._url = url
        self._answered = False  # the last round had series (or was held after one that had them)
        self._held = OutageLog(quiet_s)  # runs of held rounds, logged as outages are (flaps counted, not logged)

    def holds(self, error: PrometheusSourceError) -> bool:
        """True when `error` is an empty answer right after answers with series (or held ones)."""
        return error.reason == REASON_EMPTY and self._answered

    def held(self, error: PrometheusSourceError, now: float) -> None:
        """Say, at the start of a run of held rounds (not for each flap of one), what happened and why."""
        if not self._held.failed(REASON_EMPTY, now):
            log.debug("Prometheus answered empty again (holding last samples): %s", error.detail)
            return
        more = self._held.line_written(REASON_EMPTY, now)
        log.warning(
            "Prometheus at %s answered no series for the pods it had series for a refresh ago, twice in a row; "
            "holding every pod's last sample, not an outage (values turn stale after max_staleness_s, and never "
            "fall for it). This is %s. If it lasts: %s%s", self._url, LIKELY_CAUSES, error.detail, more)

    def answered(self, now: float) -> None:
        """A round with series: the end of a run of held rounds, said when its start was."""
        self._answered = True
        since = self._held.since
        if since is not None and self._held.recovered():
            log.info("Prometheus at %s answers with series again after %.0f s", self._url, now - since)

    def failed(self) -> None:
        """An outage: an empty answer after it is no longer one right after good answers."""
        self._answered = False
