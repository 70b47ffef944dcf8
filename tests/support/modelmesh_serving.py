"""A stand-in for the modelmesh-serving controller's say over a runtime Deployment's replicas, for tests that need
the cluster's answer to a ServingRuntime change (the fake API server runs no controller: tests/fakes/kube/kserve.py).

Read from kserve/modelmesh-serving 9c7a2b7: `ServingRuntimeReconciler.Reconcile` (controllers/
servingruntime_controller.go), which runs on every change of a ServingRuntime (`For(&ServingRuntime{})`) and of
the Deployment it owns, and the ServingRuntime webhook (apis/serving/v1alpha1/servingruntime_webhook.go). Kept in
one place so that every test's controller decides alike, and a test of what a user's step does to the running
pods checks it against this rule, not against a copy that drifted.

Scale to zero is the `in_use` switch: False is a runtime no InferenceService uses (past the grace period).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tests.fakes.kube import FakeKubeApi

CLASS_ANNOTATION: Final = "serving.kserve.io/autoscalerClass"
PODS_PER_RUNTIME: Final = 2
"""modelmesh-serving's default `podsPerRuntime` (its config's global replicas of a runtime without its own)."""
BOTH_SET: Final = "Autoscaler is enabled and also replicas variable set. You can not set both."
"""The webhook's refusal of a ServingRuntime with class `hpa` and `spec.replicas` (`validateAutoscalerClass`)."""


def autoscaler_class(runtime: Mapping[str, Any]) -> str:
    """The runtime's class as the controller reads it: `none` where the annotation is absent."""
    return str(((runtime.get("metadata") or {}).get("annotations") or {}).get(CLASS_ANNOTATION) or "none")


def deployment_replicas(runtime: Mapping[str, Any], current: int, *, pods_per_runtime: int = PODS_PER_RUNTIME,
                        hpa_min_replicas: int = 1, in_use: bool = True) -> int:
    """The Deployment replicas the controller applies for `runtime`, the Deployment being at `current`.

    Not `in_use` (scale to zero, on by default): 0, whatever the class. Class none: `spec.replicas`, else
    `podsPerRuntime`, whatever runs (so removing class `hpa` alone sets a runtime that its CPU HPA put at 5 to 2
    at once). Class hpa: the Deployment's own replicas (its HPA's), or the HPA's `minReplicas` where it is at 0.
    Another class (the webhook off): every reconcile fails, so the Deployment stays as it is."""
    if not in_use:
        return 0
    klass = autoscaler_class(runtime)
    if klass == "none":
        replicas = (runtime.get("spec") or {}).get("replicas")
        return replicas if isinstance(replicas, int) else pods_per_runtime
    if klass == "hpa" and current == 0:
        return hpa_min_replicas
    return current


def webhook_refusal(runtime: Mapping[str, Any]) -> str | None:
    """What the ServingRuntime webhook answers for `runtime` as it would be stored, or None where it admits it.
    It judges the new object alone: one patch that removes the class and sets `spec.replicas` is admitted, and
    so is one that sets class `hpa` and removes `spec.replicas`; class `hpa` with replicas is refused."""
    if autoscaler_class(runtime) == "hpa" and (runtime.get("spec") or {}).get("replicas") is not None:
        return BOTH_SET
    return None


def reconcile(kube: FakeKubeApi, namespace: str, runtime: str, deployment: str, *,
              pods_per_runtime: int = PODS_PER_RUNTIME, in_use: bool = True) -> int | None:
    """One reconcile of ServingRuntime `runtime`: the Deployment set as `deployment_replicas` decides; returns the
    replicas set where they changed, else None. Nothing where either object is missing."""
    found, running = kube.get("servingruntimes", namespace, runtime), kube.get("deployments", namespace, deployment)
    if found is None or running is None:
        return None
    current = running["spec"]["replicas"]
    wanted = deployment_replicas(found, current, pods_per_runtime=pods_per_runtime, in_use=in_use)
    if wanted == current:
        return None
    kube.set_replicas(namespace, deployment, wanted)
    return wanted
