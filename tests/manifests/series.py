"""What Prometheus would store when it scrapes with `scrape-config.yaml`: for checking rules and dashboards.

The series come from the project's real code, not from a list kept by hand: the exporter's own collectors
(ModelMesh collector and health, fed by the demo's fake ModelMesh) and the adapter's own `AdapterMetrics`.
Target labels come from applying the scrape config's `relabel_configs` to the discovery labels Kubernetes
would give the runtime and adapter pods, and `honor_labels` is applied as Prometheus does. So a dashboard
query that filters on a label the scrape config does not produce, or a rule on a series the code does not
export, finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample as ScrapedSample

from autoscaler.api.app import EXTERNAL_METRIC_ROUTE
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import ServedMetric
from autoscaler.selfmetrics import AdapterMetrics
from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.fakes.prometheus import Sample
from tests.support.processes import http_get

Labels = dict[str, str]

ADAPTER_LABELS = {"job": "modelmesh-autoscaler", "namespace": "modelmesh-autoscaler", "pod": "modelmesh-autoscaler-0"}
"""The target labels the shipped adapter job gives every series of the adapter pod (with `honor_labels`,
per-runtime series keep their own namespace: `attach`)."""


# ---- relabelling, as Prometheus does it for the actions the scrape config uses ----


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def pod_discovery_labels(namespace: str, pod: str, pod_labels: Mapping[str, str], port_name: str,
                         port: int, ip: str) -> Labels:
    """The `__meta_kubernetes_*` labels of one container port of a Running pod (kubernetes_sd, role pod)."""
    labels = {
        "__address__": f"{ip}:{port}",
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_ip": ip,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_container_port_number": str(port),
        "__meta_kubernetes_pod_container_port_protocol": "TCP",
    }
    for key, value in pod_labels.items():
        labels[f"__meta_kubernetes_pod_label_{_sanitize(key)}"] = value
        labels[f"__meta_kubernetes_pod_labelpresent_{_sanitize(key)}"] = "true"
    return labels


def relabel(job: Mapping[str, Any], discovered: Labels) -> Labels | None:
    """The target labels of one discovered target under a scrape job, or None when the job drops it."""
    labels = {"job": job["job_name"], **discovered}
    for rule in job.get("relabel_configs", []):
        action = rule.get("action", "replace")
        value = rule.get("separator", ";").join(labels.get(name, "") for name in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if (action == "keep" and match is None) or (action == "drop" and match is not None):
            return None
        if action == "replace" and match is not None:
            # Go's $1 / ${1} as Python's \g<1>; an unmatched group expands to nothing in both.
            replacement = match.expand(re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", rule.get("replacement", "$1")))
            if replacement:
                labels[rule["target_label"]] = replacement
            else:
                labels.pop(rule["target_label"], None)
        elif action not in {"keep", "drop", "replace"}:
            raise NotImplementedError(f"relabel action {action!r}: teach tests/manifests/series.py")
    labels.setdefault("instance", labels["__address__"])
    return {k: v for k, v in labels.items() if not k.startswith("__")}


def attach(target: Labels, scraped: Labels, honor_labels: bool) -> Labels:
    """A scraped series' labels once stored: target labels win, or the series' own with honor_labels;
    a clash without honor_labels keeps the series' value as `exported_<name>`."""
    if honor_labels:
        return {**target, **scraped}
    stored = dict(target)
    for key, value in scraped.items():
        stored[f"exported_{key}" if key in target else key] = value
    return stored


def samples_of(registry: CollectorRegistry, target: Labels, honor_labels: bool, at: float) -> Iterator[Sample]:
    """One scrape of a registry, as stored: the exposition text parsed back, target labels attached."""
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            yield Sample(sample.name, attach(target, dict(sample.labels), honor_labels), sample.value, at)
    yield Sample("up", target, 1.0, at)


# ---- the exporter in one runtime pod, and the adapter ----


@dataclass
class _Clock:
    now: float

    def __call__(self) -> float:
        return self.now


class _GpuFamilies(Collector):
    """The GPU collector's families for one GPU (NVML itself is not here)."""

    def __init__(self, uuid: str, busy: float) -> None:
        self.uuid, self.busy = uuid, busy

    def collect(self) -> Iterator[Metric]:
        for name, value in ((names.GPU_BUSY_RATIO, self.busy), (names.GPU_MEMORY_USED_BYTES, 8e9),
                            (names.GPU_MEMORY_TOTAL_BYTES, 16e9)):
            family = GaugeMetricFamily(name, name, labels=["gpu", "uuid"])
            family.add_metric(["0", self.uuid], value)
            yield family


class ExporterPod:
    """One runtime pod's exporter: the real ModelMesh collector and health, reading a fake ModelMesh."""

    def __init__(self, load: ModelMeshLoad, gpu_busy: float, uuid: str, start: float) -> None:
        self.clock = _Clock(start)
        self.modelmesh = FakeModelMesh(load, clock=self.clock)
        self._mm_registry = CollectorRegistry(auto_describe=False)
        self._mm_registry.register(self.modelmesh)
        self.health = CollectorHealth(clock=self.clock)
        self.collector = ModelMeshCollector(self.health, "https://127.0.0.1:2112/metrics", clock=self.clock)
        self.registry = CollectorRegistry(auto_describe=False)
        for collector in (self.collector, _GpuFamilies(uuid, gpu_busy), self.health):
            self.registry.register(collector)

    def step(self, now: float, *, modelmesh_fails: bool = False) -> None:
        """ModelMesh runs until `now`, then the exporter reads it once (or fails to, keeping its values)."""
        self.clock.now = now
        if modelmesh_fails:
            self.health.failed(names.COLLECTOR_MODELMESH, names.REASON_TIMEOUT, "no answer (test)")
        else:
            self.collector.ingest(generate_latest(self._mm_registry).decode(), now)
            self.health.succeeded(names.COLLECTOR_MODELMESH)
        self.health.succeeded(names.COLLECTOR_GPU)


def adapter_metrics(adapter: str) -> list[ScrapedSample]:
    """Every sample of a running adapter's own /metrics (`adapter`: its host:port, served over https)."""
    status, text = http_get(f"https://{adapter}/metrics")
    assert status == 200, text
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def adapter_step(metrics: AdapterMetrics, namespace: str, deployment: str, pods: list[str],
                 served: Callable[[ServedMetric], float]) -> None:
    """What one refresh and a few HPA requests leave in the adapter's self-metrics."""
    metrics.requests.labels(EXTERNAL_METRIC_ROUTE, "200").inc(4)
    metrics.requests.labels(EXTERNAL_METRIC_ROUTE, "503").inc()
    metrics.request_seconds.labels(EXTERNAL_METRIC_ROUTE).observe(0.002)
    metrics.freshness.observe(12.0)
    metrics.refresh_seconds.observe(0.2)
    metrics.source_errors.labels("scrape", names.REASON_TIMEOUT).inc()
    metrics.consecutive_misses.update({(namespace, deployment): 0})
    metrics.runtime_known.update({(namespace, deployment): 1})
    metrics.served_value.update({(namespace, deployment, metric.value): served(metric) for metric in ServedMetric})
    metrics.authentications.labels("requestheader", "success").inc(5)
    metrics.authorizations.labels("allowed", "false").inc(5)
    metrics.kube_api_seconds.labels("subjectaccessreview", "ok").observe(0.01)
    for cost, pod in enumerate(pods):
        metrics.pod_deletion_cost.labels(namespace, pod).set(cost)
    metrics.deletion_cost_patches.labels("ok").inc()
    metrics.scale_down_holds.labels("queued").inc()
    metrics.set_leader(True)
