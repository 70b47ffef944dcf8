"""Every metric name the project reads from ModelMesh or publishes per pod (docs/design.md).

Names live here and nowhere else: the exporter publishes them, the adapter's sources read them, the demo's
ModelMesh stand-in serves the ModelMesh ones. Changing a name here changes the contract in docs/design.md.
"""

from typing import Final

# ---- ModelMesh's own metrics, as served by the `mm` container on :2112/metrics (docs/design.md) ----
MM_INVOKE_MODEL_MS: Final = "modelmesh_invoke_model_milliseconds"
MM_QUEUE_DELAY_MS: Final = "modelmesh_req_queue_delay_milliseconds"
MM_CACHE_MISS_MS: Final = "modelmesh_cache_miss_milliseconds"
MM_LOAD_MODEL_MS: Final = "modelmesh_loadmodel_milliseconds"
MM_LRU_AGE_S: Final = "modelmesh_instance_lru_age_seconds"
MM_LRU_S: Final = "modelmesh_instance_lru_seconds"
MM_CAPACITY_BYTES: Final = "modelmesh_instance_capacity_bytes"
MM_USED_BYTES: Final = "modelmesh_instance_used_bytes"
MM_MODELS_TOTAL: Final = "modelmesh_instance_models_total"
# With `per_model_metrics=true` in ModelMesh's MM_METRICS, its histograms (the invoke one included) carry the
# model's id in this label (and the virtual model's in `vModelId`); without it they carry no model at all.
MM_MODEL_ID_LABEL: Final = "modelId"

# ---- What the exporter publishes per pod (docs/design.md) ----
GPU_BUSY_RATIO: Final = "modelmesh_pod_gpu_busy_ratio"
GPU_LABELS: Final = ("gpu", "uuid")
"""The labels that tell a pod's GPUs (and MIG devices) apart on the GPU series: index or MIG name, and UUID."""
GPU_MEMORY_USED_BYTES: Final = "modelmesh_pod_gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES: Final = "modelmesh_pod_gpu_memory_total_bytes"
REQUESTS_TOTAL: Final = "modelmesh_pod_requests_total"
REQUESTS_PER_SECOND: Final = "modelmesh_pod_requests_per_second"
QUEUE_DELAY_SECONDS: Final = "modelmesh_pod_queue_delay_seconds"
CACHE_MISSES_PER_SECOND: Final = "modelmesh_pod_cache_misses_per_second"
LRU_AGE_SECONDS: Final = "modelmesh_pod_lru_age_seconds"
CACHE_USED_RATIO: Final = "modelmesh_pod_cache_used_ratio"
CACHE_CAPACITY_BYTES: Final = "modelmesh_pod_cache_capacity_bytes"
MODELS_LOADED: Final = "modelmesh_pod_models_loaded"
# Per model this pod served recently (label `model_id`): Unix time of the last read that saw its request count
# rise. Published only when ModelMesh labels its invoke histogram with `modelId`; feeds the unique-copy term of
# the pod's need (docs/design.md, Choosing the pod to remove).
MODEL_LAST_SERVED_TIMESTAMP: Final = "modelmesh_pod_model_last_served_timestamp_seconds"
MODEL_ID_LABEL: Final = "model_id"

# ---- The exporter's report on itself ----
COLLECTOR_SUCCESS: Final = "modelmesh_exporter_collector_success"
LAST_SUCCESS_TIMESTAMP: Final = "modelmesh_exporter_last_success_timestamp_seconds"
SCRAPE_ERRORS_TOTAL: Final = "modelmesh_exporter_scrape_errors_total"
SCRAPE_ERRORS_HELP: Final = "Failed collections by collector and reason."
"""Its HELP, which the adapter's reader looks for to skip the family whole (`autoscaler.sources.exporter_text`)."""
COLLECTOR_DURATION_SECONDS: Final = "modelmesh_exporter_collector_duration_seconds"
EXPORTER_TIME: Final = "modelmesh_exporter_time_seconds"
MODEL_RECENCY_HORIZON: Final = "modelmesh_exporter_model_recency_horizon_seconds"
"""How long this exporter keeps a model in `MODEL_LAST_SERVED_TIMESTAMP` (`--model-recency-horizon`): the adapter's
cache need reads that series within `target_lru_age_s`, and a shorter horizon would cut its count unseen."""
CONNECTIONS_OPEN: Final = "modelmesh_exporter_connections_open"
CONNECTIONS_DROPPED_TOTAL: Final = "modelmesh_exporter_connections_dropped_total"
"""Connections the exporter closed, by `reason` (`exporter.connection_cap`): a client that read nothing of its answer
for seconds, or one closed or refused at `--max-connections`."""
BUILD_INFO: Final = "modelmesh_exporter_build_info"
"""Which build the sidecar runs (a gauge of 1, as `prometheus_build_info`): during a rollout, the pods whose sidecar
is still the old one are those of the old `revision` (`exporter.build_info`)."""
BUILD_INFO_LABELS: Final = ("version", "revision")
"""The labels of `BUILD_INFO` and of the adapter's own build-info series (`autoscaler.names.ADAPTER_BUILD_INFO`)."""
POD_INFO: Final = "modelmesh_exporter_pod_info"
"""Which pod the exporter runs in (a gauge of 1, as kube-state-metrics' `kube_pod_info`): the adapter scrapes by
pod IP, and an IP given again to another pod must not have that pod's load read as the one it scraped for."""
POD_LABELS: Final = ("namespace", "pod", "uid")
"""`POD_INFO`'s labels, each present only when the exporter was told it (downward API; kube-state-metrics' names),
in `exporter.pod_identity.PodIdentity`'s order."""

# Label values of `collector` and `reason`.
COLLECTOR_GPU: Final = "gpu"
COLLECTOR_MODELMESH: Final = "modelmesh"
REASON_CONNECT: Final = "connect"
REASON_TIMEOUT: Final = "timeout"
REASON_PARSE: Final = "parse"
REASON_TLS: Final = "tls"
REASON_HTTP: Final = "http"
REASON_NVML: Final = "nvml"
REASON_INTERNAL: Final = "internal"
COLLECTOR_REASONS: Final[dict[str, tuple[str, ...]]] = {
    COLLECTOR_MODELMESH: (REASON_CONNECT, REASON_TIMEOUT, REASON_TLS, REASON_HTTP, REASON_PARSE, REASON_INTERNAL),
    COLLECTOR_GPU: (REASON_NVML, REASON_TIMEOUT, REASON_INTERNAL, REASON_CONNECT),
}
"""The reasons each collector counts its failures by in `SCRAPE_ERRORS_TOTAL`, each published at 0 from the
collector's start: Prometheus sees no increase in a series that first appears at 1, so rate() and increase() missed a
collector's first failure of a reason. The GPU collector's `connect` is the kubelet's, when the pod's own GPUs
could not be told."""

# DCGM exporter's GPU utilisation (percent), for the adapter's `--gpu-source dcgm`.
DCGM_GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
