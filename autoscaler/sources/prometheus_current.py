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

Each reference is to bare selectors (`timestamp()` gives a sample's time only for a selector; of any other
expression it gives the query's time), so the cost is three selectors per signal instead of one: two of the
signal's series, one of the models-loaded series (one series per pod and target, as the success series is).
"""

from __future__ import annotations

from exporter import names

NEWEST_SCRAPE_SERIES = names.MODELS_LOADED
"""The series whose scrape times say when each pod was last scraped with its signals (by any of its targets)."""


def from_newest_scrape(selector: str, by: str, scraped: str = NEWEST_SCRAPE_SERIES) -> str:
    """`selector`'s series, less those whose sample is older than the newest scrape with signals of their pod
    (`by`: the namespace and pod labels, comma-separated) by `scraped` (NEWEST_SCRAPE_SERIES, with the matchers
    the selector carries, so that an untrusted job's scrapes do not count either). Series keep all their labels,
    so the caller aggregates as before; of the series left, several per pod only where two targets scraped it at
    the same millisecond."""
    newest = f"max by ({by}) (timestamp({scraped}))"
    return f"({selector} unless (timestamp({selector}) < on ({by}) group_left () {newest}))"
