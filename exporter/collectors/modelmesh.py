"""Reads the local ModelMesh container's `/metrics` and turns its counters into per-pod load signals.

ModelMesh reports cumulative histograms; the autoscaler needs rates over a window. Each scrape's counters
are folded into running totals that survive a ModelMesh restart, and rates are the change of those totals
across the last `load_window_s`.

Counters are followed **per series** (name and labels), the way Prometheus's `rate()` does, not as one sum:
a series that went down was reset (the container restarted, what it reads now is all new); a series that
vanished (a truncated body, per-model series of an unloaded model) adds nothing and is remembered, so it
does not count twice when it comes back; a new series counts in full. Comparing sums instead would read a
vanished series as a restart and count the whole history again as new load.

A scrape that fails or is garbled changes nothing: the last good values stay published and the health
timestamp stays where it was, so consumers can see the data is old instead of seeing zero load.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from exporter import names
from exporter.collectors.health import CollectorHealth

log = logging.getLogger(__name__)

# The counters the exporter follows, by the field name used in readings and totals.
REQUESTS: Final = "requests"
QUEUE_COUNT: Final = "queue_count"
QUEUE_SUM_MS: Final = "queue_sum_ms"
CACHE_MISSES: Final = "cache_misses"
COUNTER_FIELDS: Final = (REQUESTS, QUEUE_COUNT, QUEUE_SUM_MS, CACHE_MISSES)

_COUNTER_SAMPLES: Final = {
    f"{names.MM_INVOKE_MODEL_MS}_count": REQUESTS,
    f"{names.MM_QUEUE_DELAY_MS}_count": QUEUE_COUNT,
    f"{names.MM_QUEUE_DELAY_MS}_sum": QUEUE_SUM_MS,
    f"{names.MM_CACHE_MISS_MS}_count": CACHE_MISSES,
}
_REQUIRED_GAUGES: Final = (names.MM_CAPACITY_BYTES, names.MM_USED_BYTES, names.MM_MODELS_TOTAL, names.MM_LRU_AGE_S)

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted, as a hashable key."""


class ScrapeFailure(Exception):
    """A ModelMesh scrape that produced no usable data; `reason` is the error-counter label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ModelMeshReading:
    """The raw values of one good scrape: cumulative counters per series, and instantaneous gauges."""

    counters: Mapping[str, Mapping[Labels, float]]
    """Field (`REQUESTS`, ...) → series labels → cumulative value, as ModelMesh reported it."""
    lru_age_s: float
    capacity_bytes: float
    used_bytes: float
    models_loaded: float

    def total(self, field: str) -> float:
        """The field summed over its series (ModelMesh's own, reset-prone count)."""
        return sum(self.counters.get(field, {}).values())


def parse_modelmesh(text: str) -> ModelMeshReading:
    """Extract what the exporter needs from ModelMesh's exposition text.

    A histogram without any series yet (no request since start: the invoke histogram is labelled, so it
    has no series before its first observation) counts as zero. The instance gauges are always present in
    real ModelMesh output, so their absence means a truncated or foreign body: a parse failure. So are a
    body that does not end in a newline (cut off mid-line) and negative, NaN or infinite values.
    """
    if not text.endswith("\n"):
        raise ScrapeFailure(names.REASON_PARSE, "body does not end with a newline (truncated?)")
    counters: dict[str, dict[Labels, float]] = {field: {} for field in COUNTER_FIELDS}
    gauges: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                field = _COUNTER_SAMPLES.get(sample.name)
                if field is not None:
                    key = tuple(sorted(sample.labels.items()))
                    counters[field][key] = _checked(sample.name, sample.value)
                elif sample.name in _REQUIRED_GAUGES:
                    gauges[sample.name] = _checked(sample.name, sample.value)
    except ScrapeFailure:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise ScrapeFailure(names.REASON_PARSE, f"unparseable exposition: {error}") from error
    missing = [name for name in _REQUIRED_GAUGES if name not in gauges]
    if missing:
        raise ScrapeFailure(names.REASON_PARSE, f"ModelMesh output lacks {', '.join(missing)}")
    return ModelMeshReading(
        counters=counters,
        lru_age_s=gauges[names.MM_LRU_AGE_S],
        capacity_bytes=gauges[names.MM_CAPACITY_BYTES],
        used_bytes=gauges[names.MM_USED_BYTES],
        models_loaded=gauges[names.MM_MODELS_TOTAL],
    )


def _checked(name: str, value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ScrapeFailure(names.REASON_PARSE, f"{name} has invalid value {value}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Totals:
    """Reset-absorbing cumulative counters (field → total) at one monotonic time."""

    at: float
    values: Mapping[str, float]

    def __getitem__(self, field: str) -> float:
        return self.values.get(field, 0.0)


@dataclass(frozen=True, slots=True)
class Rates:
    """The windowed signals, over `elapsed_s` seconds ending at the latest reading."""

    requests_per_second: float
    queue_delay_s: float
    cache_misses_per_second: float
    elapsed_s: float


class CounterWindow:
    """Running totals across counter resets, and rates over a trailing window.

    The first reading is the baseline: totals start at ModelMesh's own counts, so `requests_total` reads
    like ModelMesh's counter until the first restart and keeps growing after it.
    """

    def __init__(self, window_s: float, forget_after_s: float = 3600.0) -> None:
        """`forget_after_s`: how long a vanished series is remembered (bounds memory under label churn)."""
        self.window_s = window_s
        self._forget_after_s = forget_after_s
        self._history: deque[Totals] = deque()
        self._last: dict[tuple[str, Labels], tuple[float, float]] = {}  # series → (value, seen at)
        self.resets = 0

    def add(self, reading: ModelMeshReading, at: float) -> None:
        """Fold in one reading taken at monotonic time `at` (seconds)."""
        previous = self._history[-1] if self._history else None
        reset_series = 0
        values: dict[str, float] = {}
        for field in COUNTER_FIELDS:
            increase = 0.0
            for labels, value in reading.counters.get(field, {}).items():
                key = (field, labels)
                last = self._last.get(key)
                if last is None:
                    increase += value  # new series: all of it happened since it appeared
                elif value >= last[0]:
                    increase += value - last[0]
                else:
                    increase += value  # reset: counting started again from zero
                    reset_series += 1
                self._last[key] = (value, at)
            values[field] = increase if previous is None else previous[field] + increase
        if previous is not None and reset_series:
            self.resets += 1
            log.info(
                "%d ModelMesh counter series went down: the container restarted; counting on from the reset",
                reset_series,
            )
        self._history.append(Totals(at, values))
        # Keep one point at or before the window start so the rate covers the whole window.
        while len(self._history) > 2 and self._history[1].at <= at - self.window_s:
            self._history.popleft()
        stale = [key for key, (_, seen) in self._last.items() if seen < at - self._forget_after_s]
        for key in stale:
            del self._last[key]

    @property
    def latest(self) -> Totals | None:
        return self._history[-1] if self._history else None

    def rates(self) -> Rates | None:
        """Rates over the window (or the time since the first reading, if shorter); None before two readings.

        Mean queue delay is Δsum / Δcount of the queue histogram: the mean over the requests queued in the
        window, 0 when none was.
        """
        if len(self._history) < 2:
            return None
        first, last = self._history[0], self._history[-1]
        elapsed = last.at - first.at
        if elapsed <= 0:
            return None
        queued = last[QUEUE_COUNT] - first[QUEUE_COUNT]
        queue_delay_s = (last[QUEUE_SUM_MS] - first[QUEUE_SUM_MS]) / queued / 1000.0 if queued > 0 else 0.0
        return Rates(
            requests_per_second=(last[REQUESTS] - first[REQUESTS]) / elapsed,
            queue_delay_s=queue_delay_s,
            cache_misses_per_second=(last[CACHE_MISSES] - first[CACHE_MISSES]) / elapsed,
            elapsed_s=elapsed,
        )


class ModelMeshCollector(Collector):
    """Scrapes ModelMesh in the background and publishes the §3 load and cache metrics.

    `clock` is monotonic time for the rate windows and the loop (a wall-clock step must not bend a rate);
    the health timestamps use the wall clock of `health`.
    """

    def __init__(
        self,
        health: CollectorHealth,
        url: str,
        *,
        ssl_context: ssl.SSLContext | bool = True,
        timeout_s: float = 2.0,
        load_window_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._health = health
        self._url = url
        self._ssl = ssl_context
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._window = CounterWindow(load_window_s)
        self._reading: ModelMeshReading | None = None
        health.register(names.COLLECTOR_MODELMESH)

    @property
    def window(self) -> CounterWindow:
        return self._window

    async def scrape_once(self, session: aiohttp.ClientSession) -> bool:
        """One scrape; on failure the previous values stay and the failure is counted by reason."""
        started = time.perf_counter()
        try:
            text, at = await self._fetch(session)
            self.ingest(text, at)
        except ScrapeFailure as failure:
            self._health.failed(names.COLLECTOR_MODELMESH, failure.reason, f"{self._url}: {failure}")
            return False
        finally:
            self._health.observe_duration(names.COLLECTOR_MODELMESH, time.perf_counter() - started)
        self._health.succeeded(names.COLLECTOR_MODELMESH)
        return True

    def ingest(self, text: str, at: float) -> None:
        """Parse one body read at monotonic time `at` and fold it in; raises ScrapeFailure, changing nothing."""
        reading = parse_modelmesh(text)
        self._window.add(reading, at)
        self._reading = reading

    async def _fetch(self, session: aiohttp.ClientSession) -> tuple[str, float]:
        """The body and the time its counters were read (when the response headers arrived).

        A server that hangs up before answering on a reused keep-alive connection is retried once at once:
        that is the server closing an idle connection as we sent, not an outage.
        """
        for attempt in (1, 2):
            try:
                async with session.get(self._url, ssl=self._ssl, timeout=self._timeout) as response:
                    at = self._clock()
                    if response.status != 200:
                        raise ScrapeFailure(names.REASON_HTTP, f"HTTP {response.status}")
                    return await response.text(), at
            except TimeoutError as error:
                raise ScrapeFailure(names.REASON_TIMEOUT, f"no answer within {self._timeout.total} s") from error
            except (aiohttp.ClientSSLError, ssl.SSLError) as error:
                raise ScrapeFailure(names.REASON_TLS, str(error)) from error
            except aiohttp.ServerDisconnectedError as error:
                if attempt == 1:
                    continue
                raise ScrapeFailure(names.REASON_CONNECT, f"server closed the connection: {error}") from error
            except aiohttp.ClientPayloadError as error:
                raise ScrapeFailure(names.REASON_PARSE, f"incomplete body: {error}") from error
            except aiohttp.ClientConnectionError as error:
                raise ScrapeFailure(names.REASON_CONNECT, str(error)) from error
            except (aiohttp.ClientError, UnicodeDecodeError) as error:
                raise ScrapeFailure(names.REASON_PARSE, str(error)) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, interval_s: float) -> None:
        """Scrape every `interval_s` until cancelled; an unexpected error is logged and the loop goes on."""
        async with aiohttp.ClientSession() as session:
            while True:
                started = self._clock()
                try:
                    await self.scrape_once(session)
                except Exception as error:  # a bug must not stop collection for good
                    log.exception("ModelMesh scrape failed unexpectedly")
                    self._health.failed(names.COLLECTOR_MODELMESH, names.REASON_INTERNAL, repr(error))
                await asyncio.sleep(max(0.0, interval_s - (self._clock() - started)))

    def collect(self) -> Iterable[Metric]:
        reading, totals, rates = self._reading, self._window.latest, self._window.rates()
        if reading is None or totals is None:
            return
        yield CounterMetricFamily(
            names.REQUESTS_TOTAL, "Inference requests that ran in this pod; ModelMesh restarts are absorbed.",
            value=totals[REQUESTS],
        )
        if rates is not None:
            yield GaugeMetricFamily(
                names.REQUESTS_PER_SECOND, "Requests per second that ran in this pod, over the load window.",
                value=rates.requests_per_second,
            )
            yield GaugeMetricFamily(
                names.QUEUE_DELAY_SECONDS, "Mean request queue delay over the load window, in seconds.",
                value=rates.queue_delay_s,
            )
            yield GaugeMetricFamily(
                names.CACHE_MISSES_PER_SECOND, "Model cache misses per second over the load window.",
                value=rates.cache_misses_per_second,
            )
        # ModelMesh reads 0 when no model is loaded (DESIGN §2): no LRU, so no series.
        if reading.models_loaded > 0 and reading.lru_age_s > 0:
            yield GaugeMetricFamily(
                names.LRU_AGE_SECONDS, "Seconds since this pod's least recently used model was last used.",
                value=reading.lru_age_s,
            )
        if reading.capacity_bytes > 0:
            yield GaugeMetricFamily(
                names.CACHE_USED_RATIO, "Fraction of the model cache in use, 0..1.",
                value=min(1.0, reading.used_bytes / reading.capacity_bytes),
            )
        yield GaugeMetricFamily(
            names.CACHE_CAPACITY_BYTES, "Model cache capacity of this pod in bytes.", value=reading.capacity_bytes
        )
        yield GaugeMetricFamily(
            names.MODELS_LOADED, "Model copies loaded in this pod.", value=reading.models_loaded
        )
