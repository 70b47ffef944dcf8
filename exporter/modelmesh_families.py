"""What the ModelMesh collector serves of one good read, frozen: its families can be rendered in a worker thread.

The first scrape after a read renders these families (`exporter.rendered_metrics`), one series a model served
within the horizon: some 360 ms of CPU at 30,000 models, five times that under the sidecar's 200m CPU limit. On the
event loop /healthz (the liveness probe) and every other scrape waited for it, so it is rendered in a worker thread,
while the loop goes on and may take the next read. Rendering reads only this object, which no read changes (each
read makes a new one): the per-model times are a copy, made at the read, not the dict the next read updates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import names
from exporter.counter_rates import Rates, Totals
from exporter.modelmesh_text import REQUESTS, ModelMeshReading


@dataclass(frozen=True)
class ModelMeshFamilies:
    """The families of one good read: `reading` (its gauges), the running `totals` and the `rates` over the load
    window, the LRU age at the read, and per model its last-served time (`last_served`) with the horizon that
    bounds it, or None for the horizon where the pod does not say which models it served (no per-model metrics,
    the series off, or not known yet: `exporter.model_recency`)."""

    reading: ModelMeshReading
    totals: Totals
    rates: Rates | None
    lru_age_s: float | None
    horizon_s: float | None
    last_served: Mapping[str, float]

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            names.REQUESTS_TOTAL, "Inference requests that ran in this pod; ModelMesh restarts are absorbed.",
            value=self.totals[REQUESTS],
        )
        if self.rates is not None:
            yield GaugeMetricFamily(
                names.REQUESTS_PER_SECOND, "Requests per second that ran in this pod, over the load window.",
                value=self.rates.requests_per_second,
            )
            yield GaugeMetricFamily(
                names.QUEUE_DELAY_SECONDS, "Mean request queue delay over the load window, in seconds.",
                value=self.rates.queue_delay_s,
            )
            yield GaugeMetricFamily(
                names.CACHE_MISSES_PER_SECOND, "Model cache misses per second over the load window.",
                value=self.rates.cache_misses_per_second,
            )
        # No model loaded, or its LRU model just used: no LRU age (docs/design.md), so no series.
        if self.lru_age_s is not None:
            yield GaugeMetricFamily(
                names.LRU_AGE_SECONDS, "Seconds since this pod's least recently used model was last used.",
                value=self.lru_age_s,
            )
        reading = self.reading
        if reading.has_instance_record:  # else a capacity ModelMesh has not published: none, not 0 bytes
            yield GaugeMetricFamily(
                names.CACHE_USED_RATIO, "Fraction of the model cache in use, 0..1.",
                value=min(1.0, reading.used_bytes / reading.capacity_bytes),
            )
            yield GaugeMetricFamily(
                names.CACHE_CAPACITY_BYTES, "Model cache capacity of this pod in bytes.", value=reading.capacity_bytes
            )
        # Its model count is true even then: ModelMesh publishes its record when its first model loads.
        yield GaugeMetricFamily(
            names.MODELS_LOADED, "Model copies loaded in this pod.", value=reading.models_loaded
        )
        # Only with ModelMesh's per-model metrics on: without them no model is known, and there is no series.
        # With them, the family is declared even with no model served within the horizon: "served none"; and
        # before ModelMesh's first request too, when it has no counter series at all (`ModelRecency.reports`).
        # The horizon with them: a reader that counts models within a longer window learns it counts fewer.
        if self.horizon_s is not None:
            yield GaugeMetricFamily(
                names.MODEL_RECENCY_HORIZON,
                "Seconds a model stays in modelmesh_pod_model_last_served_timestamp_seconds after this pod last "
                "served it (--model-recency-horizon).",
                value=self.horizon_s,
            )
            served = GaugeMetricFamily(
                names.MODEL_LAST_SERVED_TIMESTAMP,
                "Unix time of the last ModelMesh read that saw this model served in this pod (its request count "
                "rose), on the clock of modelmesh_exporter_last_success_timestamp_seconds; a model not served "
                "within --model-recency-horizon is left out.",
                labels=[names.MODEL_ID_LABEL],
            )
            for model, at in self.last_served.items():
                served.add_metric([model], at)
            yield served
