"""What a fake pod's exporter serves in the benchmarks: the exporter's own series, at realistic size, and the pod it
runs in (`modelmesh_exporter_pod_info`, which the example sidecar patch makes every sidecar publish), so that the
figures include the adapter's reading of that line and its check of it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import names
from exporter.collectors.pod import PodInfoCollector
from exporter.pod_identity import PodIdentity

NAMESPACE = "bench"
"""The namespace of every fake pod (the scrape benchmark's runtimes')."""


def bench_pod(pod: int) -> PodIdentity:
    """Pod number `pod` as its sidecar names it: what the benchmarks' targets name the pod too, so the adapter's
    check passes as for a pod at its own IP."""
    return PodIdentity(NAMESPACE, f"pod-{pod}", str(uuid.UUID(int=pod + 1)))


def exporter_text(pod: int, gpus: int, modelmesh_stamp: float, gpu_stamp: float | None = None,
                  clock: float | None = None, models: Mapping[str, float] | None = None,
                  names_pod: bool = True) -> bytes:
    """One exporter's output for pod number `pod` with `gpus` GPUs; its ModelMesh collector last succeeded at
    `modelmesh_stamp`, its GPU collector at `gpu_stamp` (no stamp when None); its clock at the scrape reads
    `clock` (`modelmesh_exporter_time_seconds`; no such series when None, as from an exporter before it); the
    models it served recently were last served at `models`' times (one
    `modelmesh_pod_model_last_served_timestamp_seconds` per model; the family without samples for {}, none at
    all for None, as from ModelMesh without per-model metrics); `names_pod`: it says which pod it runs in
    (`bench_pod`), as a sidecar of the example patch does, else nothing, as one patched before that."""
    pod_info = list(PodInfoCollector(bench_pod(pod)).collect()) if names_pod else []

    class Families:
        def collect(self) -> list[Metric]:
            busy = GaugeMetricFamily(names.GPU_BUSY_RATIO, "busy", labels=["gpu", "uuid"])
            used = GaugeMetricFamily(names.GPU_MEMORY_USED_BYTES, "used", labels=["gpu", "uuid"])
            for gpu in range(gpus):
                busy.add_metric([str(gpu), f"GPU-{pod}-{gpu}"], (pod % 10) / 10)
                used.add_metric([str(gpu), f"GPU-{pod}-{gpu}"], 1e9)
            success = GaugeMetricFamily(names.COLLECTOR_SUCCESS, "ok", labels=["collector"])
            success.add_metric(["modelmesh"], 1)
            success.add_metric(["gpu"], 1)
            last = GaugeMetricFamily(names.LAST_SUCCESS_TIMESTAMP, "ts", labels=["collector"])
            last.add_metric(["modelmesh"], modelmesh_stamp)
            if gpu_stamp is not None:
                last.add_metric(["gpu"], gpu_stamp)
            clocks = [] if clock is None else [GaugeMetricFamily(names.EXPORTER_TIME, "clock", value=clock)]
            # Every reason each running collector counts, at 0 from the start, as the exporter publishes them.
            errors = CounterMetricFamily(names.SCRAPE_ERRORS_TOTAL, names.SCRAPE_ERRORS_HELP,
                                         labels=["collector", "reason"])
            for collector, reasons in names.COLLECTOR_REASONS.items():
                if collector != names.COLLECTOR_GPU or gpus:
                    for reason in reasons:
                        errors.add_metric([collector, reason], 0.0)
            served = []
            if models is not None:
                served.append(GaugeMetricFamily(names.MODEL_LAST_SERVED_TIMESTAMP, "served",
                                                labels=[names.MODEL_ID_LABEL]))
                for model, at in models.items():
                    served[0].add_metric([model], at)
            return [busy, used, success, last, errors, *clocks, *served,
                    CounterMetricFamily(names.REQUESTS_TOTAL, "n", value=1000.0 * pod),
                    GaugeMetricFamily(names.REQUESTS_PER_SECOND, "r", value=float(pod % 50)),
                    GaugeMetricFamily(names.QUEUE_DELAY_SECONDS, "q", value=0.01),
                    GaugeMetricFamily(names.CACHE_MISSES_PER_SECOND, "m", value=0.1),
                    GaugeMetricFamily(names.LRU_AGE_SECONDS, "a", value=600.0),
                    GaugeMetricFamily(names.CACHE_USED_RATIO, "c", value=0.7),
                    GaugeMetricFamily(names.CACHE_CAPACITY_BYTES, "cap", value=1.6e10),
                    GaugeMetricFamily(names.MODELS_LOADED, "l", value=12.0), *pod_info]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    return generate_latest(registry)
