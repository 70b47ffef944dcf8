"""A RuntimeScale created without `spec.replicas` (as docs/operations.md says to create it) next to a runtime
that already runs: neither KEDA nor the HPA can cut the runtime before the adapter adopts its replicas.

A report said KEDA reads such a RuntimeScale as one at 0 replicas and "scales it from zero" to `minReplicaCount`
before the bridge adopts, cutting an 8-pod runtime to 1. KEDA's and Kubernetes' sources say otherwise: the API
server answers the `scale` GET of a custom resource without `spec.replicas` with a 500 ("the spec replicas
field ".spec.replicas" does not exist", `ScaleREST.Get`), KEDA's `checkTargetResourceIsScalable` stops there
(no HPA, no scale loop) and so does `GetCurrentReplicas`, and the HPA controller reports `FailedGetScale`. Every
writer of the scale GETs it first and PUTs it back with its `resourceVersion`, so none can write to a RuntimeScale
before it has replicas. These tests hold the cluster to that, the way a user would watch it; the last one shows
what the reported KEDA would have done, so that the checks here can see a cut when there is one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.api.runtimes import keda_answer
from autoscaler.kube.client import KubeClient
from autoscaler.model import ServedValue
from autoscaler.names import ServedMetric
from autoscaler.simulation.hpa_spec import HpaSpec, MetricSpec
from tests.actuation.conftest import SteppedClock
from tests.actuation.keda_cluster import (
    BEHAVIOR,
    DEPLOYMENT,
    NS,
    RUNTIME,
    RUNTIME_SCALE_PATH,
    KedaOperator,
    ModelMeshServing,
)
from tests.api.builders import runtime_view
from tests.api.keda_model import ScaledObjectModel
from tests.fakes.kube import FakeKubeApi
from tests.support.hpa_step import HpaStep

REPO = Path(__file__).resolve().parents[2]
SCALED_OBJECT = REPO / "manifests" / "examples" / "keda" / "scaled-object-triton.yaml"
RUNNING = 8
UNSET = 'the spec replicas field ".spec.replicas" does not exist'


def shipped_scaled_object(**spec: Any) -> ScaledObjectModel:
    """The example ScaledObject, with `spec` fields changed."""
    manifest = yaml.safe_load(SCALED_OBJECT.read_text())
    manifest["spec"].update(spec)
    return ScaledObjectModel.from_manifest(manifest)


def adapter_answer(desired: int | None) -> tuple[int, bytes]:
    """The adapter's KEDA answer for the runtime: `desired` replicas recommended, or unknown (a 503)."""
    if desired is None:
        status, body, _ = keda_answer(runtime_view(fresh=False))
        return status, body
    view = runtime_view()
    served = view.values[ServedMetric.DESIRED_REPLICAS]
    view = dataclasses.replace(view, values={**view.values, ServedMetric.DESIRED_REPLICAS: ServedValue(
        float(desired), float(desired), served.timestamp)})
    status, body, _ = keda_answer(view)
    return status, body


def deployment_replicas(kube: FakeKubeApi) -> int:
    return int(kube.stored("deployments", NS, DEPLOYMENT)["spec"]["replicas"])


def runtime_scale_writes(kube: FakeKubeApi) -> list[str]:
    """The writes to the RuntimeScale other than its status: who changed its spec.replicas."""
    return [f"{r.method} {r.path}" for r in kube.requests if r.resource == "runtimescales"
            and r.method in ("PUT", "PATCH", "POST") and not r.path.endswith("/status")]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def running_runtime(kube: FakeKubeApi) -> ModelMeshServing:
    """A runtime at 8 pods whose ServingRuntime sets no replicas (podsPerRuntime: 8), and a new RuntimeScale."""
    kube.add_serving_runtime(NS, RUNTIME)
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=RUNNING)
    kube.add_runtime_scale(NS, RUNTIME)
    return ModelMeshServing(kube, pods_per_runtime=RUNNING)


async def test_keda_applied_with_a_new_runtime_scale_waits_for_the_adoption_and_never_cuts_the_runtime(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, session: aiohttp.ClientSession,
    running_runtime: ModelMeshServing,
) -> None:
    keda = KedaOperator(kube, session, shipped_scaled_object(), lambda: adapter_answer(RUNNING))
    seen = [deployment_replicas(kube)]

    # KEDA gets there first (the ScaledObject applied with the RuntimeScale, the adapter not leading yet).
    for _ in range(3):
        await keda.reconcile()
        await keda.scale_loop()
        await keda.hpa_sync()
        running_runtime.reconcile()
        seen.append(deployment_replicas(kube))

    status, reason, message = keda.ready
    assert (status, reason) == ("False", "ScaledObjectCheckFailed")
    assert UNSET in message  # what `kubectl get scaledobject` shows until the adoption
    assert keda.hpa is None and keda.writes == [] and runtime_scale_writes(kube) == []

    # The adapter's leader starts: the runtime's 8 replicas are adopted; KEDA's next retry finds them.
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)
    await bridge.sync()
    for _ in range(3):
        await keda.reconcile()
        await keda.scale_loop()
        await keda.hpa_sync()
        await bridge.sync()
        running_runtime.reconcile()
        seen.append(deployment_replicas(kube))

    assert kube.stored("runtimescales", NS, RUNTIME)["spec"]["replicas"] == RUNNING
    assert (keda.ready[0], keda.original_replicas, keda.writes) == ("True", RUNNING, [])
    assert seen == [RUNNING] * len(seen)


async def test_a_plain_hpa_on_a_new_runtime_scale_reports_failed_get_scale_until_the_adoption(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, session: aiohttp.ClientSession,
    running_runtime: ModelMeshServing,
) -> None:
    """The HPA controller GETs the scale first: a 500 is `FailedGetScale` (AbleToScale False), not a target at
    0 (`ScalingDisabled`), and nothing is written until the bridge adopts the runtime's replicas."""

    async def recommendation() -> float:
        return float(RUNNING)

    hpa = HpaStep(kube.url + RUNTIME_SCALE_PATH + "/scale", recommendation, HpaSpec(
        (MetricSpec(ServedMetric.DESIRED_REPLICAS.value, "External", "AverageValue", 1.0),), min_replicas=1,
        max_replicas=10, behavior=BEHAVIOR))

    assert await hpa.sync(session) is None
    assert hpa.events == ["FailedGetScale 500"] and runtime_scale_writes(kube) == []

    await ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0).sync()
    await hpa.sync(session)
    running_runtime.reconcile()

    assert hpa.events[1:] == []  # the scale reads 8 and the recommendation is 8: nothing to do
    assert deployment_replicas(kube) == RUNNING


async def test_a_keda_that_read_an_unset_replicas_as_zero_would_cut_the_runtime(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, session: aiohttp.ClientSession,
    running_runtime: ModelMeshServing,
) -> None:
    """The reported race, with the KEDA the report assumed (one whose scale read gives 0 instead of the API
    server's 500): its `minReplicaCount` reaches the runtime. It is what the checks here would see, were the
    API server or KEDA ever to behave so; with the real ones (the tests above) it cannot happen."""
    keda = KedaOperator(kube, session, shipped_scaled_object(), lambda: adapter_answer(RUNNING),
                        reads_unset_as_zero=True)

    await keda.reconcile()
    await keda.scale_loop()
    await ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0).sync()
    running_runtime.reconcile()

    assert keda.writes == [1]
    assert deployment_replicas(kube) == 1
