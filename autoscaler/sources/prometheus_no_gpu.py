"""The pods whose exporter runs without a GPU collector (`--no-gpu`), as Prometheus's series tell them: beside the
GPU freshness answer, one marker series per such pod, which `prometheus_reader` sets apart from its values.

The scrape source reads an exporter that lists its collectors' `modelmesh_exporter_collector_success` without
`collector="gpu"` as one with no GPU collector (`PodSample.no_gpu_collector`): the pod's GPU is `absent`, not
missing, and a runtime none of whose Ready pods has one is served without it ("no ready pod has a GPU collector").
Read through Prometheus, the same exporters said `none` and "no fresh pod reports GPU busy", though Prometheus holds
those very series. One more series in an answer already asked costs no query; a pod whose exporter lists no
collectors at all (an older exporter) is not marked, as the scrape source does not mark it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from autoscaler.sources.prometheus_matchers import SeriesMatchers
from exporter import names

NO_GPU_COLLECTOR_LABEL: Final = "modelmesh_autoscaler_no_gpu_collector"
"""The label only the marker series carry (no exporter or target label is so named)."""


def with_no_gpu_collectors(gpu_freshness: str, matchers: SeriesMatchers, by: str) -> str:
    """`gpu_freshness` with a marker series (value 0, `NO_GPU_COLLECTOR_LABEL` set) for each pod (`by`: the
    namespace and pod labels) whose exporter lists its ModelMesh collector's success and not a GPU collector's."""
    listed = matchers.exporter_series(names.COLLECTOR_SUCCESS, f'collector="{names.COLLECTOR_MODELMESH}"')
    gpu_listed = matchers.exporter_series(names.COLLECTOR_SUCCESS, f'collector="{names.COLLECTOR_GPU}"')
    without_gpu = f"(max by ({by}) ({listed}) * 0 unless on ({by}) {gpu_listed})"
    return f'{gpu_freshness} or label_replace({without_gpu}, "{NO_GPU_COLLECTOR_LABEL}", "true", "", "")'


def is_marker(labels: Mapping[str, str]) -> bool:
    """Whether a series of the GPU freshness answer is a marker, no value (`with_no_gpu_collectors`)."""
    return NO_GPU_COLLECTOR_LABEL in labels
