"""PromQL that reads a signal only from its pod's newest scrape (docs/operations.md, docs/design.md).

An instant query returns every series with a sample within the lookback (5 minutes by default), whether or
not the target's latest scrape still had it. Two cases make that a wrong value, not an old one:

- A series the exporter dropped while the pod stays up gets no staleness marker when Prometheus restarted in
  between (the marker is written only by the scrape loop that saw the series). `modelmesh_pod_lru_age_seconds`
  is dropped exactly in the worst thrash (the LRU copy was just used), so its pre-restart age, a *larger* age
  and so *less* pressure, was served for the whole lookback while the pod read as fresh.
- A pod scraped by several targets (our PodMonitor beside a user's ServiceMonitor; an HA pair's series side by
  side, not deduplicated; a replica that stopped) has one series per target. Taking the larger of them let the
  slow job's old LRU age win, again the optimistic direction for that signal.

So a series is kept only when its sample is from the pod's newest scrape that has its signals: its timestamp is
not older than the newest scrape time of the pod's `modelmesh_pod_models_loaded`, which every scrape of an
exporter with a ModelMesh reading carries (unlike the LRU age, the rates before two reads, the cache use before
ModelMesh publishes a capacity). Every sample of one scrape has the scrape's timestamp, so the series of that
scrape pass and those of older scrapes (any target's) do not. A pod with no such series (an exporter with no
ModelMesh reading yet) has nothing to compare with, and its series are read as they are.

The reference is a signal series, not `modelmesh_exporter_last_success_timestamp_seconds`, though every scrape
has that: a target that keeps only the exporter's own series (a user's ServiceMonitor whose metricRelabelings
keep `modelmesh_exporter_.*`, beside our PodMonitor) has it and none of the signals. Its newer scrape was the
pod's newest, and every signal of the pod read None (held) for as long as that job scraped last. Nor is it each
series' own target's newest scrape: a target's older series would then stand for the pod beside a newer
target's scrape that dropped it (the LRU age again, the job that just saw the copy used being the newer).

"Missing data never lowers a value" still holds: a signal dropped by the newest scrape is data the exporter
no longer reports, read as the scrape source reads the same exposition (for the LRU age: the copy was just
used; for the others: unknown, which holds). What the rule removes is an older scrape's value standing in for
the newest one, which raised or lowered values according to which target happened to be slower.

The pod's freshness follows the same scrape (`scraped_after_newest_scrape`): its success times
(`modelmesh_exporter_last_success_timestamp_seconds`, both collectors) are read only from series not scraped
after the newest scrape with signals. The exporter-only job's later success time otherwise made the pod as fresh
as that job's last scrape while its signals were our job's: a job with a long interval, or one that stopped (a
Prometheus restarted without it writes no staleness marker), had its signals, up to the lookback old, served as
fresh rather than held past `max_staleness_s`, and an old low value lowered what was served.

Each reference is to bare selectors (`timestamp()` gives a sample's time only for a selector; of any other
expression it gives the query's time), so the cost is three selectors per signal instead of one: two of the
signal's series, one of the models-loaded series (one series per pod and target, as the success series is);
each freshness query two more (the success series' scrape times, the models-loaded series').
"""

from __future__ import annotations

from exporter import names

NEWEST_SCRAPE_SERIES = names.MODELS_LOADED
"""The series whose scrape times say when each pod was last scraped with its signals (by any of its targets)."""


def _newest_scrape_time(by: str, scraped: str) -> str:
    """Per pod (`by`), the scrape time of its newest scrape with signals (`scraped`: NEWEST_SCRAPE_SERIES)."""
    return f"max by ({by}) (timestamp({scraped}))"


def from_newest_scrape(selector: str, by: str, scraped: str = NEWEST_SCRAPE_SERIES) -> str:
    """`selector`'s series, less those whose sample is older than the newest scrape with signals of their pod
    (`by`: the namespace and pod labels, comma-separated) by `scraped` (NEWEST_SCRAPE_SERIES, with the matchers
    the selector carries, so that an untrusted job's scrapes do not count either). Series keep all their labels,
    so the caller aggregates as before; of the series left, several per pod only where two targets scraped it at
    the same millisecond."""
    return f"({selector} unless (timestamp({selector}) < on ({by}) group_left () {_newest_scrape_time(by, scraped)}))"


def scraped_after_newest_scrape(selector: str, by: str, scraped: str = NEWEST_SCRAPE_SERIES) -> str:
    """The scrape times of `selector`'s series scraped after their pod's newest scrape with signals (a job that
    keeps only the exporter's own series), labelled as `timestamp()` leaves them: what `unless` removes from an
    expression over `selector` so that a pod's success times are those of the scrape its signals come from.
    Nothing for a pod with no `scraped` series, whose success times are all read as they are."""
    return f"(timestamp({selector}) > on ({by}) group_left () {_newest_scrape_time(by, scraped)})"
