"""A runtime, its RuntimeScale, KEDA and the adapter's bridge against the fake Kubernetes API, stepped one actor
at a time, for the tests of what happens while a new RuntimeScale waits for its replicas to be adopted.

- `ModelMeshServing`: the modelmesh-serving controller for a runtime without an autoscaler class: the
  Deployment's replicas follow `ServingRuntime.spec.replicas`, or the global `podsPerRuntime` without one.
- `KedaOperator`: the parts of KEDA that touch the scale target, as its source does them (tests/api/keda_model.py
  names the files): the ScaledObject reconcile (`checkTargetResourceIsScalable`, a GET of the RuntimeScale's
  `scale` subresource, before the HPA and the scale loop exist), one tick of the scale loop (`GetCurrentReplicas`,
  `RequestScale` and `updateScaleOnScaleTarget`: GET the Scale, PUT it back with the replicas changed) and one
  sync of the HPA KEDA made (`tests/support/hpa_step.py`), fed the adapter's KEDA answer.
  `reads_unset_as_zero=True` is the KEDA a previous report assumed: one that reads a RuntimeScale without
  `spec.replicas` as 0 and whose write lands; the real API server answers that GET with a 500 instead.

Every write goes through HTTP to the fake API server, so the bridge reads what the others wrote, as in a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from autoscaler.simulation.hpa_spec import DEFAULT_SCALE_UP, Behavior, HpaSpec, MetricSpec, ScalingPolicy, ScalingRules
from tests.api.keda_model import ScaledObjectModel
from tests.fakes.kube import FakeKubeApi
from tests.support import modelmesh_serving
from tests.support.hpa_step import HpaStep

NS = "ml"
RUNTIME = "triton"
DEPLOYMENT = "modelmesh-serving-triton"
RUNTIME_SCALE_PATH = f"/apis/autoscaler.modelmesh.io/v1alpha1/namespaces/{NS}/runtimescales/{RUNTIME}"
_KEDA_AUTH = {"Authorization": "Bearer keda-operator-token"}
"""KEDA's operator authenticates to the API server with its service-account token."""
# The shipped example's HPA behavior (manifests/examples/keda/scaled-object-triton.yaml): no scale-down window.
BEHAVIOR = Behavior(DEFAULT_SCALE_UP, ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 15),)))


@dataclass
class ModelMeshServing:
    """Class none: the Deployment's replicas follow ServingRuntime.spec.replicas, else `pods_per_runtime`."""

    kube: FakeKubeApi
    pods_per_runtime: int

    def reconcile(self) -> None:
        modelmesh_serving.reconcile(self.kube, NS, RUNTIME, DEPLOYMENT, pods_per_runtime=self.pods_per_runtime)


@dataclass
class KedaOperator:
    """One ScaledObject on the RuntimeScale `triton`; `trigger()` is the adapter's KEDA answer (status, body)."""

    kube: FakeKubeApi
    session: aiohttp.ClientSession
    scaled: ScaledObjectModel
    trigger: Callable[[], tuple[int, bytes]]
    reads_unset_as_zero: bool = False
    ready: tuple[str, str, str] = ("Unknown", "ScaledObjectCheckFailed", "not reconciled yet")
    """The ScaledObject's Ready condition: status, reason, message."""
    original_replicas: int | None = None
    """`status.originalReplicaCount`: the target's replicas when KEDA first read them."""
    writes: list[int] = field(default_factory=list)
    """Replicas KEDA's scale loop wrote to the RuntimeScale itself."""
    hpa: HpaStep | None = None

    async def reconcile(self) -> None:
        """`Reconcile` up to the scale loop: the target's scale must be readable before anything else runs."""
        status, scale = await self._get(f"{RUNTIME_SCALE_PATH}/scale")
        if status != 200 and not self.reads_unset_as_zero:
            message = (scale.get("message") if isinstance(scale, dict) else None) or f"status {status}"
            self.ready = ("False", "ScaledObjectCheckFailed",
                          f"ScaledObject doesn't have correct scaleTargetRef specification: {message}")
            return
        if self.original_replicas is None:
            self.original_replicas = int((scale.get("spec") or {}).get("replicas") or 0) if status == 200 else 0
        self.ready = ("True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling")
        if self.hpa is None:
            self.hpa = HpaStep(self.kube.url + RUNTIME_SCALE_PATH + "/scale", self._metric, HpaSpec(
                (MetricSpec("s0-metric-api-modelmesh_desired_replicas", "External", "AverageValue",
                            self.scaled.target_value),),
                min_replicas=max(self.scaled.min_replicas, 1), max_replicas=self.scaled.max_replicas,
                behavior=BEHAVIOR))

    async def scale_loop(self) -> None:
        """One polling interval of the scale loop (started only by a reconcile that succeeded)."""
        if self.ready[0] != "True":
            return
        current = await self._current_replicas()
        written = self.scaled.request_scale(self.scaled.trigger_value(*self.trigger()), current)
        if written is None:
            return
        if self.reads_unset_as_zero and current == 0:
            await self._send("PATCH", RUNTIME_SCALE_PATH, {"spec": {"replicas": written}},
                             "application/merge-patch+json")
            self.writes.append(written)
            return
        status, scale = await self._get(f"{RUNTIME_SCALE_PATH}/scale")  # updateScaleOnScaleTarget
        if status != 200:
            return
        scale["spec"] = {"replicas": written}
        if await self._send("PUT", f"{RUNTIME_SCALE_PATH}/scale", scale) == 200:
            self.writes.append(written)

    async def hpa_sync(self) -> None:
        """One sync of the HPA KEDA made (it exists once a reconcile succeeded)."""
        if self.hpa is not None:
            await self.hpa.sync(self.session)

    async def _current_replicas(self) -> int | None:
        """`GetCurrentReplicas` for a custom resource: `spec.replicas` if it has one, else the scale subresource."""
        status, scale = await self._get(RUNTIME_SCALE_PATH)
        if status == 200 and isinstance((scale.get("spec") or {}).get("replicas"), int):
            return int(scale["spec"]["replicas"])
        status, scale = await self._get(f"{RUNTIME_SCALE_PATH}/scale")
        if status == 200:
            return int((scale.get("spec") or {}).get("replicas") or 0)
        return 0 if self.reads_unset_as_zero else None  # ErrorGettingCurrentReplicas

    async def _metric(self) -> float | None:
        """What KEDA's metrics server gives the HPA: the trigger's value, or an error (the HPA holds)."""
        return self.scaled.trigger_value(*self.trigger())

    async def _get(self, path: str) -> tuple[int, dict[str, Any]]:
        async with self.session.get(self.kube.url + path, headers=_KEDA_AUTH) as response:
            return response.status, await response.json()

    async def _send(self, method: str, path: str, body: dict[str, Any], content_type: str = "application/json"
                    ) -> int:
        async with self.session.request(method, self.kube.url + path, data=json.dumps(body),
                                        headers={"Content-Type": content_type, **_KEDA_AUTH}) as response:
            return response.status
