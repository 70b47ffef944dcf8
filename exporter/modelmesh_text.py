"""Reads ModelMesh's `/metrics` exposition into the raw values the exporter works from.

ModelMesh reports cumulative histograms and a few instance gauges; `parse_modelmesh` keeps the counters the
exporter follows, per series (name and labels), and the gauges, and rejects a body that cannot be trusted:
cut off, foreign, or carrying negative, NaN or infinite values. It is pure (text in, `ModelMeshReading` or
`ScrapeFailure` out; the narrow reader's memory of label texts changes only its cost), so the collector's fetch
loop and the tests share it. What ModelMesh writes is read by a narrow reader of its own shapes
(`exporter.modelmesh_fast`), anything else by `prometheus_client`'s parser, to the same result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from exporter import modelmesh_fast, names
from exporter.modelmesh_fast import Labels as Labels
from exporter.modelmesh_fast import NarrowReader, TooManySeries

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
SAMPLE_OF_FIELD: Final = {field: name for name, field in _COUNTER_SAMPLES.items()}
_REQUIRED_GAUGES: Final = (names.MM_CAPACITY_BYTES, names.MM_USED_BYTES, names.MM_MODELS_TOTAL, names.MM_LRU_AGE_S)
_OPTIONAL_GAUGES: Final = (names.MM_LRU_S,)
SAMPLES_READ: Final = (*_COUNTER_SAMPLES, *_REQUIRED_GAUGES, *_OPTIONAL_GAUGES)
"""The sample names the exporter reads: what it asks ModelMesh for (`/metrics?name[]=...`)."""
_READ_LINE: Final = re.compile(
    "^(?:#|" + "|".join(re.escape(name) + r"[{ \t]" for name in SAMPLES_READ) + ").*$",
    re.MULTILINE)
"""A line `parse_modelmesh` reads: a comment, or a sample of a series it uses."""

MAX_SERIES_READ: Final = 320_000
"""The most series of those read (`SAMPLES_READ`) a body may hold: 80,000 models served by one method with one
code (each a request count, a queue count and sum, a cache-miss count; some 32 MiB of ModelMesh's text, what the
exporter reads of a body), half as many served by two of each. ModelMesh keeps a model's series for its
container's life, and each series read is kept from read to read: the sidecar's memory limit is sized on a body of
this many (manifests/examples/exporter-sidecar-patch.yaml; tests/exporter/test_exporter_memory_limit.py). A body
of shorter lines fits more in the same bytes: past this bound it is refused, the last good values kept, and is
not read on into an OOM kill at every read."""
_TOO_MANY: Final = (
    "more than {max:,} series of those the exporter reads, where it keeps at most {max:,} (a series per model, "
    "method and code served since ModelMesh's container started: with per-model metrics on, some 80,000 models): "
    "stopped reading, the last good values kept. Restarting the mm container starts its series anew; or turn "
    "ModelMesh's per-model metrics off (MM_METRICS without per_model_metrics=true)")

_MAX_LRU_AHEAD_S: Final = 3600.0
"""An LRU time further ahead than this is ModelMesh's "no model" (Long.MAX_VALUE ms), not a copy it stamped
20 s ahead (`newCopiesTimestamp` in ModelMesh.java)."""

_NARROW: Final = NarrowReader(SAMPLES_READ, may_be_negative=(names.MM_LRU_AGE_S,))
"""The reader of what ModelMesh writes; the library reads the rest (`parse_with_library`)."""


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
    lru_time_s: float | None = None
    """When this pod's LRU model was last used (Unix s, `modelmesh_instance_lru_seconds`), if served."""

    def total(self, field: str) -> float:
        """The field summed over its series (ModelMesh's own, reset-prone count)."""
        return sum(self.counters.get(field, {}).values())

    @property
    def has_instance_record(self) -> bool:
        """Whether the instance gauges are a published instance record. ModelMesh's read 0 from its start until
        it first publishes one (when its first model loads, or from its janitor within 6 minutes), and its last
        record before it stops is empty: capacity 0, which no running ModelMesh has. The model count (0) and
        the LRU (none) are true then; the capacity is not known."""
        return self.capacity_bytes > 0

    def lru_age_at(self, now: float) -> float | None:
        """Seconds since this pod's LRU model was used, at Unix time `now`; None when it holds no model, or the
        model was just used (ModelMesh's own 0, or a copy it stamped ahead).

        ModelMesh sets `modelmesh_instance_lru_age_seconds` only when it publishes its instance record (on a
        change worth publishing, at most every 2 s, or from its janitor every 6 minutes), so on a pod whose LRU
        model stays unused it stands still for minutes. The last-use time it publishes with it does not age:
        the age is that time from `now` (the `mm` container shares the node's clock). Without that series,
        ModelMesh's own age is used."""
        if self.models_loaded <= 0:
            return None
        if self.lru_time_s is None:
            age = self.lru_age_s
        elif 0 < self.lru_time_s <= now + _MAX_LRU_AHEAD_S:
            age = now - self.lru_time_s
        else:
            return None  # 0: not published yet; Long.MAX_VALUE ms: no model
        return age if age > 0 else None


def parse_modelmesh(text: str | Sequence[str], max_series: int = MAX_SERIES_READ) -> ModelMeshReading:
    """Extract what the exporter needs from ModelMesh's exposition text.

    A histogram without any series yet (no request since start: the invoke histogram is labelled, so it
    has no series before its first observation) counts as zero. Only the lines of the series it uses are
    parsed (`_lines_read`). The instance gauges are always present in
    real ModelMesh output, so their absence means a truncated or foreign body: a parse failure. So are a
    body that does not end in a newline (cut off mid-line) and negative, NaN or infinite values, except a
    negative LRU age, which is ModelMesh's own reading of a model stamped as used in the future (read as 0).

    The text is read by the narrow reader (`exporter.modelmesh_fast`), which reads what ModelMesh writes, and
    with `prometheus_client`'s parser where it gives up (`parse_with_library`): the same reading either way.
    A body of more than `max_series` series read is refused (`MAX_SERIES_READ`). `text` may come in pieces of
    whole lines (`exporter.body_pieces`): the narrow reader reads them as they are, the library joined.
    """
    reading = parse_narrowly(text, max_series)
    return parse_with_library(text, max_series) if reading is None else reading


def parse_narrowly(text: str | Sequence[str], max_series: int = MAX_SERIES_READ) -> ModelMeshReading | None:
    """`parse_modelmesh` by the narrow reader alone; None where it gives up: a line it does not know, a value
    the library's path refuses, or an instance gauge with several series (labelled: not ModelMesh's), whose
    last in the text it does not say."""
    _check_ends(text)
    try:
        series = _NARROW.series(text, max_series)
    except TooManySeries as error:
        raise ScrapeFailure(names.REASON_PARSE, _TOO_MANY.format(max=max_series)) from error
    if series is None:
        return None
    counters = {field: series.get(name, {}) for name, field in _COUNTER_SAMPLES.items()}
    gauges: dict[str, float] = {}
    for name in (*_REQUIRED_GAUGES, *_OPTIONAL_GAUGES):
        values = series.get(name)
        if values:
            if len(values) > 1:
                return None
            (value,) = values.values()
            gauges[name] = _lru_age(value) if name == names.MM_LRU_AGE_S else value
    return _reading(counters, gauges)


def parse_with_library(text: str | Sequence[str], max_series: int = MAX_SERIES_READ) -> ModelMeshReading:
    """`parse_modelmesh` with `prometheus_client`'s parser alone: the fallback, and the reference the narrow
    reader is held to (the path before it)."""
    _check_ends(text)
    text = text if isinstance(text, str) else "".join(text)
    read = 0
    counters: dict[str, dict[Labels, float]] = {field: {} for field in COUNTER_FIELDS}
    gauges: dict[str, float] = {}
    gauge_series: set[tuple[str, Labels]] = set()
    try:
        for family in text_string_to_metric_families(_lines_read(text)):
            read += len(family.samples)
            if read > max_series:
                raise ScrapeFailure(names.REASON_PARSE, _TOO_MANY.format(max=max_series))
            for sample in family.samples:
                field = _COUNTER_SAMPLES.get(sample.name)
                if field is not None:
                    key = tuple(sorted(sample.labels.items()))
                    if key in counters[field]:
                        raise _repeated(sample.name, sample.labels)
                    counters[field][key] = _checked(sample.name, sample.value)
                elif sample.name in _REQUIRED_GAUGES or sample.name in _OPTIONAL_GAUGES:
                    series = (sample.name, tuple(sorted(sample.labels.items())))
                    if series in gauge_series:
                        raise _repeated(sample.name, sample.labels)
                    gauge_series.add(series)
                    if sample.name == names.MM_LRU_AGE_S and -math.inf < sample.value < 0:
                        gauges[sample.name] = 0.0  # a model stamped ahead: just used (`_lru_age`)
                    else:
                        gauges[sample.name] = _checked(sample.name, sample.value)
    except ScrapeFailure:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as error:  # Overflow: 1e309 as digits
        raise ScrapeFailure(names.REASON_PARSE, f"unparseable exposition: {error}") from error
    return _reading(counters, gauges)


def labels_text(labels: Iterable[tuple[str, str]]) -> str:
    """Labels as an exposition writes them, `{a="1",b="2"}`; empty for none (for the lines that name a series)."""
    pairs = ",".join(f'{key}="{value}"' for key, value in labels)
    return "{" + pairs + "}" if pairs else ""


def _repeated(name: str, labels: Mapping[str, str]) -> ScrapeFailure:
    """A series written twice: no exposition holds one (Prometheus refuses such a scrape), so the body is two
    answers run together or garbled. Taken as good, whichever value was read could be a count that went down at
    the next read: a restart, and ModelMesh's whole history counted again as new load."""
    return ScrapeFailure(names.REASON_PARSE, f"{name}{labels_text(sorted(labels.items()))} appears twice (two answers "
                                             "run together?)")


def _check_ends(text: str | Sequence[str]) -> None:
    last = text if isinstance(text, str) else next((piece for piece in reversed(text) if piece), "")
    if not last.endswith("\n"):
        raise ScrapeFailure(names.REASON_PARSE, "body does not end with a newline (truncated?)")


def _lru_age(value: float) -> float:
    """ModelMesh stamps the copies it adds for a hot model 20 s in the future (`newCopiesTimestamp` in
    ModelMesh.java), so a pod holding only such copies reads a negative age: just used."""
    return 0.0 if value < 0 else value


def _reading(counters: dict[str, dict[Labels, float]], gauges: Mapping[str, float]) -> ModelMeshReading:
    missing = [name for name in _REQUIRED_GAUGES if name not in gauges]
    if missing:
        raise ScrapeFailure(names.REASON_PARSE, f"ModelMesh output lacks {', '.join(missing)}")
    return ModelMeshReading(
        counters=counters,
        lru_age_s=gauges[names.MM_LRU_AGE_S],
        capacity_bytes=gauges[names.MM_CAPACITY_BYTES],
        used_bytes=gauges[names.MM_USED_BYTES],
        models_loaded=gauges[names.MM_MODELS_TOTAL],
        lru_time_s=gauges.get(names.MM_LRU_S),
    )


def _lines_read(text: str) -> str:
    """The comments and the samples of the series the exporter uses, in order; the rest is dropped unparsed.

    With ModelMesh's per-model metrics on, a pod keeps a series per model in every histogram, buckets
    included: the invoke histogram alone of 2,000 models is about 5 MB of text, which `prometheus_client`'s
    parser took 2.7 s to read on the exporter's event loop (its `/healthz` answered in seconds meanwhile).
    The exporter asks ModelMesh for its series only (`SAMPLES_READ`); for a server that sends everything
    anyway, the buckets and the families the exporter does not use are skipped by one regular expression, in
    C, which keeps only the lines it finds (splitting every line first would hold each one as a string: too
    much for the sidecar's memory limit at the 32 MiB a read may be). So a garbled line among them no longer
    fails the read either; every line of a series it uses is still parsed and checked.

    A piece of `modelmesh_fast.SCAN_CHARS` per call, cut after a newline: one call over the largest body held
    Python's lock about 0.5 s, and the exporter's event loop answered nothing meanwhile."""
    lines: list[str] = []
    start, end = 0, len(text)
    while start < end:
        cut = text.find("\n", start + modelmesh_fast.SCAN_CHARS)
        stop = end if cut < 0 else cut + 1
        lines += _READ_LINE.findall(text, start, stop)
        start = stop
    return "\n".join(lines) + "\n"


def _checked(name: str, value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ScrapeFailure(names.REASON_PARSE, f"{name} has invalid value {value}")
    return float(value)
