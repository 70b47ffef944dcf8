"""A query's answer read as values by pod, for `PrometheusReader`'s rounds: the shape of the vector result checked,
each series' raw value (validated on join) indexed by (namespace, pod), or with its model or its failing reason,
and the series that carry no value of the pod set apart: one whose exporter names another pod
(`prometheus_other_pod`), a pod's marker of no GPU collector (`prometheus_no_gpu`), and one without the namespace
or pod label, not a pod to join (the flags say how Prometheus names them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from autoscaler.sources.prometheus_answers import REASON_PARSE, PrometheusSourceError
from autoscaler.sources.prometheus_modelmesh_failing import REASON_LABEL
from autoscaler.sources.prometheus_no_gpu import is_marker
from autoscaler.sources.prometheus_other_pod import answered
from autoscaler.sources.prometheus_promql import PodRef
from exporter import names
from exporter.pod_identity import PodIdentity

Answers = dict[str, dict[PodRef, str]]
"""One round's raw values: signal field → (namespace, pod) → the value as Prometheus wrote it."""

ModelAnswers = dict[PodRef, dict[str, str]]
"""The models query's raw values: (namespace, pod) → model id → last-served time as Prometheus wrote it (no
model at all: the pod publishes the series but served nothing within the window)."""


class VectorIndex:
    """Mixed into `PrometheusReader`: its answers read by pod, and the round's series set apart, kept on it."""

    _ns_label: str
    _pod_label: str
    unlabelled: list[str]
    other_pods: dict[PodRef, PodIdentity]
    no_gpu_collector: set[PodRef]

    def _failing_key(self, labels: Mapping[str, str]) -> tuple[str, str, str]:
        return labels[self._ns_label], labels[self._pod_label], labels.get(REASON_LABEL, "")

    def _model_key(self, labels: Mapping[str, str]) -> tuple[str, str, str]:
        return labels[self._ns_label], labels[self._pod_label], labels.get(names.MODEL_ID_LABEL, "")

    def _pod_key(self, labels: Mapping[str, str]) -> PodRef:
        return labels[self._ns_label], labels[self._pod_label]

    def _parse(self, promql: str, result: Any, key: Callable[[Mapping[str, str]], Any]) -> dict[Any, str]:
        """Check the shape of a vector result and index its raw values (validated on join)."""
        if not isinstance(result, list):
            raise PrometheusSourceError(REASON_PARSE, f"{promql}: result is {type(result).__name__}")
        values: dict[Any, str] = {}
        for item in result:
            try:
                labels, value = item["metric"], item["value"]
                claimed = answered(labels, self._ns_label, self._pod_label) if isinstance(labels, dict) else None
                if claimed is not None:  # not a value: the series' exporter is another pod's
                    self.other_pods[self._pod_key(labels)] = claimed
                    continue
                if isinstance(labels, dict) and is_marker(labels):  # not a value: the pod has no GPU collector
                    self.no_gpu_collector.add(self._pod_key(labels))
                    continue
                values[key(labels)] = value[1]
            except (KeyError, IndexError, TypeError) as error:
                if isinstance(item, dict) and isinstance(item.get("metric"), dict) and "value" in item:
                    self.unlabelled.append(promql)  # a series without namespace/pod labels: not a pod we can join
                    continue
                raise PrometheusSourceError(REASON_PARSE, f"{promql}: bad item {item!r}") from error
        return values


def models_by_pod(values: Mapping[tuple[str, str, str], str]) -> ModelAnswers:
    """The models query's values (keyed by `VectorIndex._model_key`) indexed by pod then model."""
    models: ModelAnswers = {}
    for (namespace, pod, model), value in values.items():
        served = models.setdefault((namespace, pod), {})
        if model:
            # Interned: every pod and every refresh names the same few models; one string each.
            served[sys.intern(model)] = value
    return models
