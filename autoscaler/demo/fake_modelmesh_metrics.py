"""What a fake ModelMesh runtime container counts and serves at `/metrics` (`FakeModelMesh`), driven by the caller.

It serves the metric names, types, labels and histogram buckets of ModelMesh's own Prometheus exporter
(`Metrics.PrometheusMetrics` in kserve/modelmesh) with `per_model_metrics=true` in its MM_METRICS: millisecond
histograms labelled `method, code, modelId, vModelId` (the invoke histogram) or `modelId, vModelId` (queue
delay, cache miss, load; prometheus_client prints label names sorted, which no reader depends on), with a
series per model from the model's first observation, and the `modelmesh_instance_*` gauges, the LRU model's
last-use time (`modelmesh_instance_lru_seconds`, whole seconds since the epoch, which the exporter reads the age
from) with its age. So the exporter is exercised against the real shape, its per-model recency included, with
the quirks docs/design.md lists: an empty pod reads LRU age 0 (and its last-use time Java's `Long.MAX_VALUE`
milliseconds in seconds), and a container restart resets the counters. `per_model=False` (`--no-per-model-
metrics`) serves ModelMesh's default instead: `method, code` on the invoke histogram, the others unlabelled and
there from the start at 0.

Counters are integrated from the current rates each time they are read, so a caller sets a request rate
and the histogram counts grow at exactly that rate, in whole requests. The requests are spread evenly, in turn,
over the models the pod holds (`models_loaded`, at least one); each instance names its models apart from every
other instance's (`model_ids`), as ModelMesh keeps one copy of a cold model: a pod that served a model is the
only one that holds it. The demo and the tests drive it in-process (`FakeModelMesh.update`) or over HTTP
(`fake_modelmesh`: `POST /control` with a JSON object of `ModelMeshLoad` fields, `POST /reset` to simulate a
restart) when it runs as its own process.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names

__all__ = ["FAULTS", "GIB", "MS_TIME_BUCKETS", "NO_LRU_SECONDS", "FakeModelMesh", "ModelMeshLoad"]


# ModelMesh's MS_TIME_BUCKETS.
MS_TIME_BUCKETS: tuple[float, ...] = (
    0.5, 1, 2, 5, 10, 20, 50, 75, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000, 120000, 300000,
)
GIB = 1024**3
NO_LRU_SECONDS: Final = (2**63 - 1) // 1000
"""`modelmesh_instance_lru_seconds` of a pod that holds no model: ModelMesh's `Long.MAX_VALUE` ms, in seconds."""

FAULTS: Final = frozenset({"garbage", "truncated", "cut", "slow", "error", "endless"})
"""Fault modes of the fake's `/metrics` (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class ModelMeshLoad:
    """What the caller drives: the rates and cache state the fake reports from now on."""

    requests_per_second: float = 0.0
    latency_ms: float = 20.0
    queue_delay_ms: float = 0.0
    cache_misses_per_second: float = 0.0
    load_time_ms: float = 2000.0
    capacity_bytes: float = 16 * GIB
    cache_used_ratio: float = 0.5
    lru_age_s: float = 900.0
    models_loaded: int = 8
    lru_time_published: bool = True
    """Whether `modelmesh_instance_lru_seconds` is served (the exporter then tells the age from it, in whole
    seconds, as from a real ModelMesh); False leaves ModelMesh's age gauge alone, which carries `lru_age_s` as
    it is (a reading no whole-second last-use time can give, such as a subnormal age)."""


@dataclass(slots=True)
class _Series:
    """One label set's histogram: whole observations, their sum, and the cumulative bucket counts."""

    count: int = 0
    total: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(MS_TIME_BUCKETS))

    def observe(self, value_ms: float, times: int) -> None:
        self.count += times
        self.total += value_ms * times
        for index, bound in enumerate(MS_TIME_BUCKETS):
            if value_ms <= bound:
                self.buckets[index] += times


@dataclass(slots=True)
class _Histogram:
    """A histogram fed at a rate: its observations so far, counted in whole ones over its series (by model id,
    or "" alone without per-model metrics) in turn, so the series' counts sum to the whole observations."""

    observed: float = 0.0
    counted: int = 0
    series: dict[str, _Series] = field(default_factory=dict)
    turn: int = 0

    def observe_rate(self, per_second: float, value_ms: float, seconds: float, models: Sequence[str]) -> None:
        self.observed += per_second * seconds
        due = math.floor(self.observed) - self.counted
        if due <= 0:
            return
        self.counted += due
        each, rest = divmod(due, len(models))
        for index, model in enumerate(models):
            extra = 1 if (index - self.turn) % len(models) < rest else 0
            if each + extra:
                self.series.setdefault(model, _Series()).observe(value_ms, each + extra)
        self.turn = (self.turn + rest) % len(models)


class FakeModelMesh(Collector):
    """The state of one fake ModelMesh container: current load and the counters it has accumulated."""

    _instances = itertools.count()

    def __init__(self, load: ModelMeshLoad | None = None, clock: Callable[[], float] = time.monotonic, *,
                 per_model: bool = True, model_prefix: str | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        """`per_model`: serve as ModelMesh with `per_model_metrics=true` (a series per model), else its default.
        `model_prefix`: the start of this pod's model ids (default: one of its own in this process); pods
        given the same prefix serve copies of the same models. `wall`: the node's clock, which the LRU model's
        last-use time is told in (the exporter beside it reads the same clock)."""
        self._clock = clock
        self._wall = wall
        self.load = load or ModelMeshLoad()
        self.per_model = per_model
        self._prefix = model_prefix or f"fake{next(self._instances)}"
        self._last = clock()
        self._invoke, self._queue, self._cache_miss, self._load_model = self._histograms()
        self.copies: tuple[str, ...] = ()
        """Copies of other pods' models loaded here (`load_copy`), served beside its own."""
        self.restarts = 0
        self.fault: str | None = None
        self.fault_delay_s = 5.0
        self.scrapes = 0

    def set_fault(self, fault: str | None, delay_s: float | None = None) -> None:
        """Break `/metrics` in one of the `FAULTS` ways from now on; None serves good metrics again."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {', '.join(sorted(FAULTS))} or null")
        self.fault = fault
        if delay_s is not None:
            self.fault_delay_s = float(delay_s)

    def update(self, **changes: float) -> ModelMeshLoad:
        """Change the load from now on; counters so far are kept."""
        self._advance()
        self.load = dataclasses.replace(self.load, **changes)  # type: ignore[arg-type]
        return self.load

    def load_copy(self, model_id: str) -> None:
        """Load a copy of another pod's model, as ModelMesh loads a hot model on a pod that did not hold it: from
        now on it is one of the models this pod's requests are spread over (`model_ids`), so the exporter reports
        this pod as serving it, and that model is no longer one only its first pod served. Its counters so far
        stay with the models that served them."""
        if model_id not in self.model_ids:
            self._advance()
            self.copies = (*self.copies, model_id)

    def reset_counters(self) -> None:
        """Behave like a restarted container: every counter starts again from zero."""
        self._advance()
        self._invoke, self._queue, self._cache_miss, self._load_model = self._histograms()
        self.restarts += 1

    def _histograms(self) -> tuple[_Histogram, ...]:
        """A new container's histograms: with per-model metrics, no series before a model's first observation
        (a labelled child exists once used); without, the unlabelled ones there from the start at 0."""
        return tuple(_Histogram() if self.per_model or labelled else _Histogram(series={"": _Series()})
                     for labelled in (True, False, False, False))

    @property
    def model_ids(self) -> tuple[str, ...]:
        """The models this pod holds now, over which its requests and cache misses are spread (`modelId`): its own,
        then the copies of other pods' models loaded on it (`load_copy`)."""
        if not self.per_model:
            return ("",)
        own = tuple(f"{self._prefix}-model-{index}" for index in range(max(1, self.load.models_loaded)))
        return own + self.copies

    def _advance(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        load, models = self.load, self.model_ids
        for histogram, rate, value in (
            (self._invoke, load.requests_per_second, load.latency_ms),
            (self._queue, load.requests_per_second, load.queue_delay_ms),
            (self._cache_miss, load.cache_misses_per_second, load.load_time_ms),
            (self._load_model, load.cache_misses_per_second, load.load_time_ms),
        ):
            histogram.observe_rate(rate, value, elapsed, models)

    def _histogram(self, name: str, help_text: str, histogram: _Histogram,
                   labels: Sequence[tuple[str, str]]) -> Metric:
        """`labels`: ModelMesh's labels before the model's (`method`, `code` of the invoke histogram)."""
        per_model = ("modelId", "vModelId") if self.per_model else ()
        family = HistogramMetricFamily(name, help_text, labels=[*(n for n, _ in labels), *per_model])
        for model, series in histogram.series.items():
            buckets = [(_format_bound(bound), float(count))
                       for bound, count in zip(MS_TIME_BUCKETS, series.buckets, strict=True)]
            buckets.append(("+Inf", float(series.count)))
            values = [*(v for _, v in labels), *((model, "") if self.per_model else ())]
            family.add_metric(values, buckets, sum_value=series.total)
        return family

    def describe(self) -> Iterable[Metric]:
        """The families `collect` yields, by name and type: as in ModelMesh's own registry, `/metrics?name[]=...`
        (which the exporter sends) selects by these names, and would find nothing of a collector without them."""
        for name in (names.MM_INVOKE_MODEL_MS, names.MM_QUEUE_DELAY_MS, names.MM_CACHE_MISS_MS, names.MM_LOAD_MODEL_MS):
            yield HistogramMetricFamily(name, "")
        for name in (names.MM_LRU_S, names.MM_LRU_AGE_S, names.MM_CAPACITY_BYTES, names.MM_USED_BYTES,
                     names.MM_MODELS_TOTAL):
            yield GaugeMetricFamily(name, "")

    def collect(self) -> Iterable[Metric]:
        self._advance()
        load = self.load
        yield self._histogram(
            names.MM_INVOKE_MODEL_MS, "Internal model server inference request time", self._invoke,
            (("method", "ModelInfer"), ("code", "OK")),
        )
        yield self._histogram(names.MM_QUEUE_DELAY_MS, "Time spent in inference request queue", self._queue, ())
        yield self._histogram(names.MM_CACHE_MISS_MS, "Cache miss delay", self._cache_miss, ())
        yield self._histogram(names.MM_LOAD_MODEL_MS, "Time taken to load model", self._load_model, ())
        empty = load.models_loaded <= 0
        if load.lru_time_published:
            yield GaugeMetricFamily(
                names.MM_LRU_S, "Last used time of least recently used model in pod (in secs since epoch)",
                value=float(NO_LRU_SECONDS if empty else math.floor(self._wall() - load.lru_age_s)))
        for name, help_text, value in (
            (names.MM_LRU_AGE_S, "Last used age of least recently used model in pod (secs ago)",
             0.0 if empty else load.lru_age_s),
            (names.MM_CAPACITY_BYTES, "Effective model capacity of pod excluding unload buffer",
             load.capacity_bytes),
            (names.MM_USED_BYTES, "Amount of capacity currently in use by loaded models",
             0.0 if empty else load.capacity_bytes * load.cache_used_ratio),
            (names.MM_MODELS_TOTAL, "Number of model copies loaded in pod",
             float(max(0, load.models_loaded) + len(self.copies))),
        ):
            yield GaugeMetricFamily(name, help_text, value=value)


def _format_bound(bound: float) -> str:
    return repr(float(bound))
