"""Publishes which build runs (`exporter.build_info`) as a gauge of 1 labelled `version` and `revision`, as
`prometheus_build_info`: `count by (revision) (modelmesh_exporter_build_info)` shows which pods still run an old
sidecar during a rollout. (The adapter's twin, `modelmesh_autoscaler_build_info`, is a Gauge of its AdapterMetrics:
its refresh process renders its Gauges only.)"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import build_info, names


class BuildInfoCollector(Collector):
    """One sample of 1, fixed for the process's life: made once and served as is."""

    def __init__(self) -> None:
        self._family = GaugeMetricFamily(names.BUILD_INFO, "The build this exporter runs (its version and commit).",
                                         labels=list(names.BUILD_INFO_LABELS))
        self._family.add_metric([build_info.version(), build_info.revision()], 1.0)

    def describe(self) -> Iterable[Metric]:
        """The family `collect` yields, for the registry's `name[]` filter (see ModelMeshCollector)."""
        yield GaugeMetricFamily(names.BUILD_INFO, "")

    def collect(self) -> Iterable[Metric]:
        yield self._family
