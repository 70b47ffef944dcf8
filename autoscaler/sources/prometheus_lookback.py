"""Whether Prometheus keeps every pod's series in every answer: its `--query.lookback-delta` and the exporters'
scrape interval, measured once and said once when they do not fit.

An instant query finds a series only if it has a sample within the lookback-delta before the query's time. With a
lookback-delta shorter than the scrape interval, a query between two scrapes finds nothing: pods go absent and
back (an empty answer, from the very first round, when the exporters are scraped at once), and the log asked
whether Prometheus scrapes the exporters, which it does. With a scrape interval longer than `max_staleness_s`,
every pod's sample turns stale before its next scrape: values 503 for part of every interval.

Neither is a guess here. The lookback-delta is Prometheus's own flag, as /api/v1/status/flags says it (Thanos,
Mimir and VictoriaMetrics serve no such page: then it is not said). The scrape interval is the spacing of one pod's
samples over the last `SPACING_WINDOW_S`, read with a range selector, which no lookback-delta bounds. The check
runs at the first round that reaches Prometheus and shows what such settings cause (an empty answer, a Ready pod
without series, a pod whose sample is older than `max_staleness_s`), and again every `RECHECK_S` until a spacing
is measured (a pod scraped a minute ago has one sample): a few requests once a run, none while all is well.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import statistics
from collections.abc import Sequence
from typing import Final

from autoscaler.sources.prometheus_promql import PodRef
from autoscaler.sources.prometheus_reader import PrometheusReader

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

LOOKBACK_FLAG: Final = "query.lookback-delta"
"""The flag's name on /api/v1/status/flags (without its dashes)."""

SPACING_WINDOW_S: Final = 600.0
"""How far back one pod's samples are read to measure their spacing: ten scrapes of a 60 s interval."""

RECHECK_S: Final = 300.0
"""How long after a check that measured no spacing the next one runs."""

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


def spacing_s(times: Sequence[float]) -> float | None:
    """The usual time between consecutive samples (the median gap: a missed scrape makes one gap twice as long);
    None with fewer than two samples."""
    ordered = sorted(times)
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered) if later > earlier]
    return statistics.median(gaps) if gaps else None


def advice(lookback_s: float | None, spacing: float, max_staleness_s: float, pod: str) -> list[str]:
    """What does not fit, each with what to write: the lookback-delta under the spacing of `pod`'s samples, the
    spacing over `max_staleness_s`. Nothing where both fit, or the lookback-delta is not known."""
    said: list[str] = []
    if lookback_s is not None and lookback_s < spacing:
        said.append(
            f"its --query.lookback-delta {lookback_s:g} s is shorter than the exporters' scrape interval (the samples "
            f"of {pod} are {spacing:.0f} s apart): an instant query between two scrapes finds no series, so pods go "
            f"absent and back, or every pod at once (an empty answer). Start Prometheus with "
            f"--query.lookback-delta={go_duration(2 * spacing)} or more (twice the interval; its default is 5m; "
            "prometheus-operator: spec.query.lookbackDelta), or scrape the exporters more often")
    if spacing > max_staleness_s:
        said.append(
            f"the exporters' samples are {spacing:.0f} s apart (those of {pod}), longer than the default "
            f"max_staleness_s of {max_staleness_s:g} s (--max-staleness, else 3 x --refresh-interval): every pod "
            "turns stale before its next scrape and its values 503 until that scrape. Scrape them at most every "
            f"{go_duration(max_staleness_s / 2, at_most=True)} (the PodMonitor's interval), or set --max-staleness "
            f"{math.ceil(2 * spacing)} (a runtime's policy: max_staleness_s)")
    return said


class LookbackCheck:
    """Measures the lookback-delta and the scrape interval at the first round that reaches Prometheus, until a
    spacing is measured; says what does not fit, once."""

    def __init__(self, url: str, max_staleness_s: float) -> None:
        self._url = url
        self.max_staleness_s = max_staleness_s
        """The default policy's, which a stale sample is told by."""
        self._next_at: float | None = 0.0  # when the next check is due; None once one measured a spacing

    def due(self, now: float) -> bool:
        return self._next_at is not None and now >= self._next_at

    async def run(self, reader: PrometheusReader, pod: PodRef, selector: str, now: float) -> None:
        """Measure with `reader` (the spacing of `pod`'s series `selector`, with its labels) and warn for what
        does not fit."""
        spacing = spacing_s(await reader.sample_times(selector, SPACING_WINDOW_S))
        if spacing is None:
            self._next_at = now + RECHECK_S
            log.debug("no spacing of %s/%s's samples yet: checking the scrape interval again in %.0f s",
                      *pod, RECHECK_S)
            return
        self._next_at = None
        flag = await reader.flag(LOOKBACK_FLAG)
        lookback_s = None if flag is None else prometheus_duration_s(flag)
        said = advice(lookback_s, spacing, self.max_staleness_s, "/".join(pod))
        if said:
            log.warning("Prometheus at %s cannot keep every pod's series in every answer: %s", self._url,
                        "; and ".join(said))
