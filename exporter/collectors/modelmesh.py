"""Reads the local ModelMesh container's `/metrics` and turns its counters into per-pod load signals.

ModelMesh reports cumulative histograms; the autoscaler needs rates over a window. Each scrape's counters
are folded into running totals that survive a ModelMesh restart (a counter that went down was reset: what
it reads now is all new), and rates are the change of those totals across the last `load_window_s`.

A scrape that fails or is garbled changes nothing: the last good values stay published and the health
timestamp stays where it was, so consumers can see the data is old instead of seeing zero load.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from exporter import names
from exporter.collectors.health import CollectorHealth

log = logging.getLogger(__name__)


class ScrapeFailure(Exception):
    """A ModelMesh scrape that produced no usable data; `reason` is the error-counter label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ModelMeshReading:
    """The raw values of one good scrape: cumulative counters and instantaneous gauges."""

    requests: float
    queue_count: float
    queue_sum_ms: float
    cache_misses: float
    lru_age_s: float
    capacity_bytes: float
    used_bytes: float
    models_loaded: float


_COUNTERS = ("requests", "queue_count", "queue_sum_ms", "cache_misses")
_REQUIRED_GAUGES = (names.MM_CAPACITY_BYTES, names.MM_USED_BYTES, names.MM_MODELS_TOTAL, names.MM_LRU_AGE_S)


def parse_modelmesh(text: str) -> ModelMeshReading:
    """Extract what the exporter needs from ModelMesh's exposition text.

    The invoke histogram is summed over its `method`/`code` series; a histogram without any series yet (no
    request since start) counts as zero. The instance gauges are always present in real ModelMesh output,
    so their absence means a truncated or foreign body, reported as a parse failure.
    """
    if not text.endswith("\n"):
        raise ScrapeFailure(names.REASON_PARSE, "body does not end with a newline (truncated?)")
    sums: dict[str, float] = {}
    gauges: dict[str, float] = {}
    wanted_sums = {
        f"{names.MM_INVOKE_MODEL_MS}_count": "requests",
        f"{names.MM_QUEUE_DELAY_MS}_count": "queue_count",
        f"{names.MM_QUEUE_DELAY_MS}_sum": "queue_sum_ms",
        f"{names.MM_CACHE_MISS_MS}_count": "cache_misses",
    }
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = wanted_sums.get(sample.name)
                if key is not None:
                    sums[key] = sums.get(key, 0.0) + _checked(sample.name, sample.value)
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
        requests=sums.get("requests", 0.0),
        queue_count=sums.get("queue_count", 0.0),
        queue_sum_ms=sums.get("queue_sum_ms", 0.0),
        cache_misses=sums.get("cache_misses", 0.0),
        lru_age_s=gauges[names.MM_LRU_AGE_S],
        capacity_bytes=gauges[names.MM_CAPACITY_BYTES],
        used_bytes=gauges[names.MM_USED_BYTES],
        models_loaded=gauges[names.MM_MODELS_TOTAL],
    )


def _checked(name: str, value: float) -> float:
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise ScrapeFailure(names.REASON_PARSE, f"{name} has invalid value {value}")
    return float(value)


@dataclass(frozen=True, slots=True)
class _Totals:
    """Reset-absorbing cumulative counters at one point in time."""

    at: float
    requests: float
    queue_count: float
    queue_sum_ms: float
    cache_misses: float


class CounterWindow:
    """Running totals across counter resets, and rates over a trailing window."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._history: deque[_Totals] = deque()
        self._last_raw: ModelMeshReading | None = None
        self.resets = 0

    def add(self, reading: ModelMeshReading, at: float) -> None:
        previous = self._history[-1] if self._history else None
        last_raw = self._last_raw
        if previous is None or last_raw is None:
            totals = _Totals(at, reading.requests, reading.queue_count, reading.queue_sum_ms, reading.cache_misses)
        else:
            reset = any(getattr(reading, field) < getattr(last_raw, field) for field in _COUNTERS)
            if reset:
                self.resets += 1
                log.info("ModelMesh counters went down: container restarted; counting on from the reset")
            deltas = {
                field: getattr(reading, field) if reset else getattr(reading, field) - getattr(last_raw, field)
                for field in _COUNTERS
            }
            totals = _Totals(
                at,
                previous.requests + deltas["requests"],
                previous.queue_count + deltas["queue_count"],
                previous.queue_sum_ms + deltas["queue_sum_ms"],
                previous.cache_misses + deltas["cache_misses"],
            )
        self._last_raw = reading
        self._history.append(totals)
        # Keep one point at or before the window start so the rate covers the whole window.
        while len(self._history) > 2 and self._history[1].at <= at - self.window_s:
            self._history.popleft()

    @property
    def latest(self) -> _Totals | None:
        return self._history[-1] if self._history else None

    def rates(self) -> tuple[float, float, float] | None:
        """(requests/s, mean queue delay s, cache misses/s) over the window; None before two readings."""
        if len(self._history) < 2:
            return None
        first, last = self._history[0], self._history[-1]
        elapsed = last.at - first.at
        if elapsed <= 0:
            return None
        requests = (last.requests - first.requests) / elapsed
        queued = last.queue_count - first.queue_count
        queue_delay_s = (last.queue_sum_ms - first.queue_sum_ms) / queued / 1000.0 if queued > 0 else 0.0
        misses = (last.cache_misses - first.cache_misses) / elapsed
        return requests, queue_delay_s, misses


class ModelMeshCollector(Collector):
    """Scrapes ModelMesh in the background and publishes the §3 load and cache metrics."""

    def __init__(
        self,
        health: CollectorHealth,
        url: str,
        *,
        ssl_context: ssl.SSLContext | bool = True,
        timeout_s: float = 2.0,
        load_window_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._health = health
        self._url = url
        self._ssl = ssl_context
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._window = CounterWindow(load_window_s)
        self._reading: ModelMeshReading | None = None
        health.register(names.COLLECTOR_MODELMESH)

    async def scrape_once(self, session: aiohttp.ClientSession) -> None:
        """One scrape; on failure the previous values stay and the failure is counted by reason."""
        try:
            text = await self._fetch(session)
            reading = parse_modelmesh(text)
        except ScrapeFailure as failure:
            self._health.failed(names.COLLECTOR_MODELMESH, failure.reason, f"{self._url}: {failure}")
            return
        self._window.add(reading, self._clock())
        self._reading = reading
        self._health.succeeded(names.COLLECTOR_MODELMESH)

    async def _fetch(self, session: aiohttp.ClientSession) -> str:
        try:
            async with session.get(self._url, ssl=self._ssl, timeout=self._timeout) as response:
                if response.status != 200:
                    raise ScrapeFailure(names.REASON_HTTP, f"HTTP {response.status}")
                return await response.text()
        except TimeoutError as error:
            raise ScrapeFailure(names.REASON_TIMEOUT, f"no answer within {self._timeout.total} s") from error
        except (aiohttp.ClientSSLError, ssl.SSLError) as error:
            raise ScrapeFailure(names.REASON_TLS, str(error)) from error
        except aiohttp.ClientConnectionError as error:
            if isinstance(error, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
                raise ScrapeFailure(names.REASON_PARSE, f"incomplete body: {error}") from error
            raise ScrapeFailure(names.REASON_CONNECT, str(error)) from error
        except aiohttp.ClientPayloadError as error:
            raise ScrapeFailure(names.REASON_PARSE, f"incomplete body: {error}") from error
        except (aiohttp.ClientError, UnicodeDecodeError) as error:
            raise ScrapeFailure(names.REASON_PARSE, str(error)) from error

    async def run(self, interval_s: float) -> None:
        """Scrape every `interval_s` until cancelled."""
        async with aiohttp.ClientSession() as session:
            while True:
                started = self._clock()
                await self.scrape_once(session)
                await asyncio.sleep(max(0.0, interval_s - (self._clock() - started)))

    def collect(self) -> Iterable[Metric]:
        reading, totals, rates = self._reading, self._window.latest, self._window.rates()
        if reading is None or totals is None:
            return
        yield CounterMetricFamily(
            names.REQUESTS_TOTAL, "Inference requests that ran in this pod; ModelMesh restarts are absorbed.",
            value=totals.requests,
        )
        if rates is not None:
            requests_per_second, queue_delay_s, misses_per_second = rates
            yield GaugeMetricFamily(
                names.REQUESTS_PER_SECOND, "Requests per second that ran in this pod, over the load window.",
                value=requests_per_second,
            )
            yield GaugeMetricFamily(
                names.QUEUE_DELAY_SECONDS, "Mean request queue delay over the load window, in seconds.",
                value=queue_delay_s,
            )
            yield GaugeMetricFamily(
                names.CACHE_MISSES_PER_SECOND, "Model cache misses per second over the load window.",
                value=misses_per_second,
            )
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
