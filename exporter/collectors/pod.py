"""Publishes which pod the exporter runs in (`modelmesh_exporter_pod_info`), so that a reader that reached it by an
address another pod held before can tell (`exporter.pod_identity`)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names
from exporter.pod_identity import POD_INFO_HELP, PodIdentity


class PodInfoCollector(Collector):
    """One sample of 1 with the pod's labels, as kube-state-metrics' `kube_pod_info`: fixed for the process's life,
    so made once and served as is."""

    def __init__(self, pod: PodIdentity) -> None:
        labels = pod.labels()
        self._family = GaugeMetricFamily(
            names.POD_INFO, POD_INFO_HELP, labels=list(labels))
        self._family.add_metric(list(labels.values()), 1.0)

    def describe(self) -> Iterable[Metric]:
        """The family `collect` yields, for the registry's `name[]` filter (see ModelMeshCollector)."""
        yield GaugeMetricFamily(names.POD_INFO, "")

    def collect(self) -> Iterable[Metric]:
        yield self._family
