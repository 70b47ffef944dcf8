"""An answer with no series for any known pod, right after answers that had them: held for a while, not an outage.

Behind a Service in front of an HA pair, a replica restarted with an empty TSDB (kube-prometheus-stack without
storage keeps it in an emptyDir) answers every query it gets with nothing until its first scrapes: discovery
time plus a scrape interval. Declared an outage, that made every runtime's value 503 "metric source down" on
the refreshes that reached it, and the log sent the operator to check scrape configs, which were fine. A
`--query.lookback-delta` shorter than the scrape interval gives the same empty answers between scrapes.

So after a good round the source asks once more at once (a load balancer may send it to the other replica),
and if that is empty too it holds every pod's last sample: the round is not an outage, the samples age as in
any gap and turn stale after `max_staleness_s` (values may then rise but never fall), and the log names the
likely causes beside the old hint. A Prometheus that never answered with series keeps the outage and its
message: there the scrape configuration is the likely cause. A Prometheus that gave no answer in between (refused
connections, timeouts, HTTP errors: no word on its series) is still one whose last answer had series: stopped, then
started on an empty TSDB (the emptyDir of a new pod), it is that restart, and is held the same way. Treated as a
Prometheus that never answered with series, its first empty answer read as `now fails otherwise (empty)` with the
scrape-configuration hint (PodMonitor, NetworkPolicy), and the documented hold was never said.

The hold lasts `HOLD_LIMIT_S` at most. Without a limit, losing every series for good (a PodMonitor deleted, a
NetworkPolicy or a relabelling that stops the scrapes, Thanos with every store down) read as "not an outage"
for as long as it lasted: the source healthy, no problem in /debug, the runtimes' reason "coverage 0%" instead of
"metric source down", one line at the start and silence after. The limit is a time, not a number of refreshes
(the same at any `--interval`), and it is the time an empty replica needs to be scraped, as long as a new pod
needs (`UNSEEN_WARN_AFTER_S`: service discovery plus a 30 s scrape interval, with room for a 60 s one), not
`max_staleness_s`: that is a policy's, per runtime, and the held samples turn stale by it anyway (their values
503 then, whatever the source says); past the limit the run is the outage it is, with the outage's words. The
immediate retry is for the first empty answer of a run: asked at every held refresh, it doubled the queries
for as long as the run lasted, where the next refresh asks again anyway.
"""

from __future__ import annotations

import logging
from typing import Final

from autoscaler.sources.prometheus_answers import REASON_EMPTY, PrometheusSourceError
from exporter.outage_log import OutageLog

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

HOLD_LIMIT_S: Final = 120.0
"""How long a run of empty answers after good ones is held before it is an outage (the module says why)."""

LIKELY_CAUSES: Final = (
    "most likely a Prometheus replica with an empty TSDB (restarted without persistent storage) behind the "
    "Service or load balancer that --prometheus-url names, until its first scrapes; or Prometheus's "
    "--query.lookback-delta under twice the exporters' scrape interval (one under the interval loses every pod "
    "between two scrapes, one under twice it from a failed scrape until the next: keep it at least twice the "
    "interval)"
)


class EmptyAfterGood:
    """Whether an empty answer is held rather than an outage, and the log lines of a run of held ones."""

    def __init__(self, url: str, quiet_s: float) -> None:
        self._url = url
        self._answered = False  # its last answer had series (or was held after one that had them)
        self._unanswered = False  # it gave no answer at all since (an outage of no answers: `failed`)
        self._held = OutageLog(quiet_s)  # runs of held rounds, logged as outages are (flaps counted, not logged)
        self._lost_since: float | None = None  # the start of a run of held rounds that became an outage

    def holds(self, error: PrometheusSourceError, now: float) -> bool:
        """True when `error` is an empty answer right after answers with series, or after held ones for less than
        HOLD_LIMIT_S."""
        if error.reason != REASON_EMPTY or not self._answered:
            return False
        return self._held.since is None or now - self._held.since < HOLD_LIMIT_S

    def retries(self, error: PrometheusSourceError, now: float) -> bool:
        """True when `error` is the first empty answer of a run that `holds`: asked again at once, for a load
        balancer's other replica (later ones are not: the next refresh asks again)."""
        return self._held.since is None and self.holds(error, now)

    def held(self, error: PrometheusSourceError, now: float) -> None:
        """Say, at the start of a run of held rounds (not for each flap of one), what happened and why."""
        if not self._held.failed(REASON_EMPTY, now):
            log.debug("Prometheus answered empty again (holding last samples): %s", error.detail)
            return
        more = self._held.line_written(REASON_EMPTY, now)
        when = "before it stopped answering" if self._unanswered else "a refresh ago"
        log.warning(
            "Prometheus at %s answered no series for the pods it had series for %s, twice in a row; "
            "holding every pod's last sample, not an outage, for up to %.0f s (values turn stale after "
            "max_staleness_s, and never fall for it); then it is one. This is %s. If it lasts: %s%s",
            self._url, when, HOLD_LIMIT_S, LIKELY_CAUSES, error.detail, more)

    def answered(self, now: float) -> None:
        """A round with series: the end of a run of held rounds, said when its start was."""
        self._answered, self._unanswered, self._lost_since = True, False, None
        since = self._held.since
        if since is not None and self._held.recovered():
            log.info("Prometheus at %s answers with series again after %.0f s", self._url, now - since)

    def failed(self, error: PrometheusSourceError, now: float) -> PrometheusSourceError:
        """An outage, `error` as it is to be said: an empty answer after it is no longer one right after good
        answers. One after a run of held rounds (until a round has series again) says how long the series have
        been lost and the likely causes (the hold's line said them once, maybe long ago) beside the hint, in the
        log and in /debug. A failure that is no answer (no connection, a timeout, an HTTP error) outside a held run
        says nothing of its series: the next empty answer is still one after answers that had them."""
        if error.reason == REASON_EMPTY or self._held.since is not None:
            self._answered = False
        else:
            self._unanswered = True
        if self._held.since is not None:  # the run ends as an outage, whose own lines follow: no "answers again"
            self._lost_since = self._held.since
            self._held.recovered()
        since = self._lost_since
        if since is None or error.reason != REASON_EMPTY:
            return error
        return PrometheusSourceError(
            error.reason, f"no series for {now - since:.0f} s after answers that had them: {LIKELY_CAUSES}; or the "
            f"scrapes stopped. {error.detail}", error.kind)
