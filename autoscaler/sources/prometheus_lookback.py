"""Whether Prometheus keeps every pod's series in every answer: its `--query.lookback-delta` and the exporters'
scrape interval, measured while pods keep losing their series or turning stale, and each new finding said once.

An instant query finds a series only if it has a sample within the lookback-delta before the query's time. With a
lookback-delta shorter than the scrape interval, a query between two scrapes finds nothing: pods go absent and
back (an empty answer, from the very first round, when the exporters are scraped at once), and the log asked
whether Prometheus scrapes the exporters, which it does. With one as long as the interval, or longer but under
twice it, one failed scrape does the same until the next (what Thanos's own help says: at least twice the slowest
scrape interval). With a scrape interval longer than `max_staleness_s`, every pod's sample turns stale before its
next scrape: values 503 for part of every interval.

Neither is a guess here. The lookback-delta is the engine's own flag, as /api/v1/status/flags says it: Prometheus
and Thanos Query serve the page (Mimir and VictoriaMetrics do not: then it is not said), and both read `0s`, which
is also what Thanos Query's page says when the flag is not given, as PromQL's default of 5m. The flags tell the
engines apart (`engine_of`), so the advice names the flag of the one that answers. The scrape interval is the
spacing of the pod's newest samples of `NEWEST_SCRAPE_SERIES` (the median of its last `RECENT_GAPS` gaps, within
the last `SPACING_WINDOW_S`: a PodMonitor's interval raised 3 minutes ago, after 7 minutes at the old one, is the
new one, where the median of all 10 minutes' gaps was the old one), read with a range selector (which no
lookback-delta bounds): the series that says when the pod was last scraped with its signals,
not the exporter's success time, which a job that keeps only the exporter's own series (beside ours, scraping
more often) also has. The samples of all the pod's series of it (one per job) are taken together: a pod scraped by
two jobs has its signals as often as both scrape it. The check runs at the first round that reaches Prometheus
and shows what such settings cause (an empty answer, a Ready pod without series, a pod whose sample is older than
`max_staleness_s`), and again while rounds still show it: `FIRST_RECHECK_S` later, then twice as long each time up
to `RECHECK_S`, whatever the check found (an adapter started with Prometheus finds no samples yet, and a pod
scraped a minute ago has one; a check run after a Prometheus restart measured the right interval, and a
PodMonitor's interval raised later to over `max_staleness_s` was never said while the HPA got 503s every
interval): a few requests every 5 minutes at most, none while all is well. Each finding is said once; a check
that finds everything fits forgets what was said, so that the same misfit coming back is said again. Its reads
share the refresh's deadline with the round (`PrometheusReader.begin_refresh`); one cut by it, or by a read
timeout, is asked again on the same schedule (what the spacing shows is said at once, the lookback-delta once the
flags are read): a slow Prometheus once must not end the check for the run.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from autoscaler.sources.prometheus_check_reads import OutOfTime
from autoscaler.sources.prometheus_promql import PodRef

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

LOOKBACK_FLAG: Final = "query.lookback-delta"
"""The flag's name on /api/v1/status/flags (without its dashes)."""

SPACING_WINDOW_S: Final = 600.0
"""How far back one pod's samples are read to measure their spacing: ten scrapes of a 60 s interval."""

RECENT_GAPS: Final = 5
"""How many of the newest gaps between a pod's samples tell their spacing: recent enough for an interval changed
a few scrapes ago, and a median that one missed scrape (one gap twice as long) does not move."""

FIRST_RECHECK_S: Final = 30.0
"""How long after the first check that measured no spacing the next one runs (a few scrapes of a 15 s interval)."""

RECHECK_S: Final = 300.0
"""The longest wait between two checks (each waits twice the one before, from `FIRST_RECHECK_S`)."""

DEFAULT_LOOKBACK_S: Final = 300.0
"""PromQL's lookback-delta where the flag reads `0s` (Prometheus's and Thanos Query's engines both)."""


class CheckReads(Protocol):
    """The check's two reads (`PrometheusReader`'s): each raises `OutOfTime` where the refresh's deadline cut it."""

    async def sample_times(self, selector: str, window_s: float) -> list[list[float]]: ...

    async def flags(self) -> dict[str, str] | None: ...


@dataclass(frozen=True)
class QueryEngine:
    """The engine behind the URL, as its flags show it, and how the advice tells its lookback-delta."""

    name: str
    """As the log names it."""
    setting: str
    """How to set the lookback-delta, with `{duration}` for the value to write."""


PROMETHEUS: Final = QueryEngine("Prometheus", "Start Prometheus with --query.lookback-delta={duration} or more (twice "
                                "the interval; its default is 5m; prometheus-operator: spec.query.lookbackDelta)")
THANOS_QUERY: Final = QueryEngine("Thanos Query", "Start Thanos Query with --query.lookback-delta={duration} or more "
                                  "(twice the interval; unset or 0s it is 5m)")
OTHER_ENGINE: Final = QueryEngine("Prometheus", "Set the query engine's lookback-delta to {duration} or more (twice "
                                  "the interval; Prometheus and Thanos Query: --query.lookback-delta={duration}; "
                                  "PromQL's default is 5m)")

_GO_DURATION: Final = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_GO_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
                      "y": 31_536_000_000}


def prometheus_duration_s(text: str) -> float | None:
    """Seconds in a duration as Prometheus writes its flags (`5m`, `1m30s`, `500ms`); None for anything else."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(int(number) * _GO_UNIT_MS[unit] for number, unit in parts) / 1000


def go_duration(seconds: float, *, at_most: bool = False) -> str:
    """`seconds` as a Prometheus flag or a PodMonitor takes it (`2m`, `90s`): rounded up to a whole second, or
    `at_most` down (to a millisecond under a second)."""
    if at_most and seconds < 1:
        return f"{max(1, math.floor(seconds * 1000))}ms"
    whole = math.floor(seconds) if at_most else max(1, math.ceil(seconds))
    return f"{whole // 60}m" if whole % 60 == 0 else f"{whole}s"


def engine_of(flags: Mapping[str, str]) -> QueryEngine:
    """Thanos Query where the flags have its replica label's (it has no `config.file`); Prometheus where they have
    `config.file` and not that; else an engine the advice names no command line of."""
    if "query.replica-label" in flags:
        return THANOS_QUERY
    return PROMETHEUS if "config.file" in flags else OTHER_ENGINE


def lookback_of(flags: Mapping[str, str]) -> float | None:
    """The lookback-delta the engine applies, in seconds: `0s` is PromQL's default (Prometheus and Thanos Query
    read it so); None where the flags do not say it."""
    flag = flags.get(LOOKBACK_FLAG)
    seconds = None if flag is None else prometheus_duration_s(flag)
    return DEFAULT_LOOKBACK_S if seconds == 0 else seconds


def spacing_s(times: Sequence[float]) -> float | None:
    """The usual time between the newest consecutive samples (the median of the last `RECENT_GAPS` gaps: a missed
    scrape makes one gap twice as long; older gaps may be of an interval changed since); None with fewer than two
    samples."""
    ordered = sorted(times)
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered) if later > earlier]
    return statistics.median(gaps[-RECENT_GAPS:]) if gaps else None


def advice(lookback_s: float | None, spacing: float, max_staleness_s: float, pod: str,
           engine: QueryEngine = PROMETHEUS) -> list[str]:
    """What does not fit, each with what to write: the lookback-delta under twice the spacing of `pod`'s samples
    (one failed scrape leaves the newest sample that old), the spacing over `max_staleness_s`. Nothing where both
    fit, or the lookback-delta is not known."""
    said: list[str] = []
    if lookback_s is not None and lookback_s < 2 * spacing:
        when = ("between two scrapes" if lookback_s < spacing
                else "from the time a scrape fails until the next one succeeds")
        said.append(
            f"its --query.lookback-delta {lookback_s:g} s is shorter than twice the exporters' scrape interval (the "
            f"samples of {pod} are {spacing:.0f} s apart): an instant query finds no series {when}, so pods go "
            f"absent and back, or every pod at once (an empty answer). "
            f"{engine.setting.format(duration=go_duration(2 * spacing))}, or scrape the exporters more often")
    if spacing > max_staleness_s:
        said.append(
            f"the exporters' samples are {spacing:.0f} s apart (those of {pod}), longer than the default "
            f"max_staleness_s of {max_staleness_s:g} s (--max-staleness, else 3 x --refresh-interval): every pod "
            "turns stale before its next scrape and its values 503 until that scrape. Scrape them at most every "
            f"{go_duration(max_staleness_s / 2, at_most=True)} (the PodMonitor's interval), or set --max-staleness "
            f"{math.ceil(2 * spacing)} (a runtime's policy: max_staleness_s)")
    return said


class LookbackCheck:
    """Measures the lookback-delta and the scrape interval at the first round that reaches Prometheus and shows
    what they would cause, and again, while rounds still show it, at most every `RECHECK_S`; says each new finding
    that does not fit once."""

    def __init__(self, url: str, max_staleness_s: float) -> None:
        self._url = url
        self.max_staleness_s = max_staleness_s
        """The default policy's, which a stale sample is told by."""
        self._next_at = 0.0  # when the next check is due (at the first round from then that shows the symptom)
        self._wait_s = FIRST_RECHECK_S  # how long after this check the next one runs
        self._said: set[str] = set()  # the advice's parts said (without the pod's name): each once

    def due(self, now: float) -> bool:
        return now >= self._next_at

    async def run(self, reader: CheckReads, pod: PodRef, selector: str, now: float) -> None:
        """Measure with `reader` (the spacing of `pod`'s series `selector`, with its labels: all its series'
        samples together) and warn for what does not fit; a read the refresh's deadline cuts is asked again
        later (`OutOfTime`). Each run measures anew: the interval, or Prometheus's flags, may have changed since."""
        measured: tuple[float, str] | None = None  # the spacing, and the pod (NS/POD) it is of
        try:
            times = [at for series in await reader.sample_times(selector, SPACING_WINDOW_S) for at in series]
            spacing = spacing_s(times)
            if spacing is None:
                self._again(now, f"no spacing of {'/'.join(pod)}'s samples yet")
                return
            measured = spacing, "/".join(pod)
            flags = await reader.flags()
        except OutOfTime as cut:
            self._again(now, str(cut))
            if measured is not None:  # what the spacing shows needs no flags
                self._say(measured, None, PROMETHEUS, whole=False)
            return
        self._again(now, f"{measured[1]}'s samples are {measured[0]:.0f} s apart")
        self._say(measured, None if flags is None else lookback_of(flags),
                  PROMETHEUS if flags is None else engine_of(flags), whole=True)

    def _again(self, now: float, why: str) -> None:
        """Check again at the first refresh `_wait_s` from now that still shows the symptom."""
        self._next_at = now + self._wait_s
        log.debug("%s: checking the scrape interval again in %.0f s", why, self._wait_s)
        self._wait_s = min(2 * self._wait_s, RECHECK_S)

    def _say(self, measured: tuple[float, str], lookback_s: float | None, engine: QueryEngine, *,
             whole: bool) -> None:
        """Warn for what does not fit and was not said yet (`measured`: the spacing, and its pod; another pod with
        the same finding is no new finding). A `whole` check (the flags read, or known not served) that finds
        everything fits forgets what was said: the same misfit coming back later is news."""
        spacing, pod = measured
        parts = advice(lookback_s, spacing, self.max_staleness_s, pod, engine)
        if whole and not parts:
            self._said.clear()
        said = [part for part in parts if part.replace(pod, "") not in self._said]
        self._said.update(part.replace(pod, "") for part in said)
        if said:
            log.warning("%s at %s cannot keep every pod's series in every answer: %s", engine.name, self._url,
                        "; and ".join(said))
