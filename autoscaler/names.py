"""The metric names the adapter serves through external.metrics.k8s.io (docs/design.md, What the adapter serves).

These are the only places the served names are spelled; the API, the refresher and the manifests' HPA refer
to them through this module.
"""

from enum import StrEnum
from typing import Final


class ServedMetric(StrEnum):
    """One series the adapter serves per runtime."""

    DESIRED_REPLICAS = "modelmesh_desired_replicas"
    GPU_BUSY = "modelmesh_gpu_busy"
    REQUEST_LOAD = "modelmesh_request_load"
    CACHE_PRESSURE = "modelmesh_cache_pressure"


API_GROUP: Final = "external.metrics.k8s.io"
API_VERSION: Final = "v1beta1"
GROUP_VERSION: Final = f"{API_GROUP}/{API_VERSION}"

# Selector keys that name a runtime (docs/design.md) and the Deployment name prefix ModelMesh uses.
SELECTOR_DEPLOYMENT: Final = "deployment"
SELECTOR_SERVINGRUNTIME: Final = "servingruntime"
SERVINGRUNTIME_DEPLOYMENT_PREFIX: Final = "modelmesh-serving-"

ADAPTER_BUILD_INFO: Final = "modelmesh_autoscaler_build_info"
"""Which build the adapter runs, a gauge of 1 labelled `version` and `revision` (`exporter.names.BUILD_INFO_LABELS`),
as `prometheus_build_info`: which replicas are still old during a rollout."""

DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"
MODELMESH_SERVICE_LABEL: Final = "modelmesh-service"
"""The label modelmesh-controller puts on runtime Deployments and their pods."""
POLICY_ANNOTATION_PREFIX: Final = "autoscaler.modelmesh.io/"


_BY_NAME: Final = {metric.value: metric for metric in ServedMetric}


def lookup_metric(name: str) -> ServedMetric | None:
    """Find a served metric by name, ignoring case: the HPA's client lower-cases metric names. (A dict, not
    `ServedMetric(name)`: the Enum call costs several thousand instructions on every request.)"""
    return _BY_NAME.get(name.lower())


def runtime_labels(deployment: str) -> dict[str, str]:
    """The `metricLabels` of a served item: never null, servingruntime only where the name implies one."""
    labels = {SELECTOR_DEPLOYMENT: deployment}
    if deployment.startswith(SERVINGRUNTIME_DEPLOYMENT_PREFIX):
        labels[SELECTOR_SERVINGRUNTIME] = deployment.removeprefix(SERVINGRUNTIME_DEPLOYMENT_PREFIX)
    return labels
