"""The adapter writes nothing in a namespace that `--namespaces` leaves out, a policy-file runtime's included.

`serve --namespaces team-b --config FILE` with FILE naming a runtime in team-a: the start-up warning said its pods
were watched and its values served with no HPA bounds and no bridge, yet the leader wrote
`controller.kubernetes.io/pod-deletion-cost` on its pods, a namespace the operator did not list (under a
cluster-wide grant; the namespaced overlay would refuse each patch). Now `--namespaces` bounds every write: team-a's
pods are left as they are, team-b's get their costs, and the warning and the runtime's /debug say so.

The real `serve` over the fake Kubernetes API, real exporters on the pods' IPs; what was written is read off the
requests the API server received and the pods' annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

OUTSIDE, SERVED = "team-a", "team-b"
"""In this order on purpose: a pass of the writer sends its first writes by namespace, so a write in team-a, were
there one, reaches the API server before the one in team-b that the test waits for."""
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
POD = "triton-0"
IPS = {OUTSIDE: "127.0.0.6", SERVED: "127.0.0.7"}


async def until(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """`check()` (run in a thread) once it is truthy; else fail with its last answer."""
    last = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while not (last := await asyncio.to_thread(check)):
                await asyncio.sleep(0.5)
            return last
    raise AssertionError(f"after {timeout:g} s still {last!r}")


def served_value(kubeconfig: Path, namespace: str) -> str | None:
    """The runtime's `modelmesh_desired_replicas` as its HPA reads it (None: not served)."""
    code, body = get_raw(kubeconfig, f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/"
                                     f"modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}")
    return body["items"][0]["value"] if code == 0 else None


def debug_warnings(kubeconfig: Path, namespace: str) -> list[str]:
    code, document = get_raw(kubeconfig, f"/debug/runtimes/{namespace}/{DEPLOYMENT}")
    assert code == 0, document
    return list(document["warnings"])


async def test_no_deletion_cost_is_written_on_the_pods_of_a_namespace_left_out(tmp_path: Path) -> None:
    exporter_port, adapter_port = free_port(), free_port()
    config = tmp_path / "policy.yaml"
    config.write_text(f"runtimes:\n  - {{namespace: {OUTSIDE}, deployment: {DEPLOYMENT}}}\n")
    log = tmp_path / "adapter.log"
    runners: list[web.AppRunner] = []
    async with FakeKubeApi() as kube:
        for namespace in (OUTSIDE, SERVED):
            kube.add_deployment(namespace, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR,
                                annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        with contextlib.ExitStack() as stack:
            try:
                runners.append(await start_pod(
                    stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=50.0)), namespace=OUTSIDE,
                    name=POD, ip=IPS[OUTSIDE], labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0",
                     "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--namespaces", SERVED, "--config", str(config), "--exporter-port", str(exporter_port),
                     "--refresh-interval", "1", "--window", "3", "--leader-elect", "false"],
                    f"https://127.0.0.1:{adapter_port}/healthz", log))
                adapter = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")
                # team-a's runtime is served (as the warning says): from here on every pass of the writer sees it.
                await until(lambda: served_value(adapter, OUTSIDE))
                runners.append(await start_pod(
                    stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=50.0)), namespace=SERVED,
                    name=POD, ip=IPS[SERVED], labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                written = await until(lambda: kube.pod_annotations(SERVED, POD).get(DELETION_COST_ANNOTATION))
                outside_debug = await asyncio.to_thread(debug_warnings, adapter, OUTSIDE)
            finally:
                for runner in runners:
                    await runner.cleanup()
        patched = [(p.namespace, p.name) for p in kube.patches if p.resource == "pods"]
        outside_annotations = kube.pod_annotations(OUTSIDE, POD)

    assert written is not None  # team-b, listed, gets its cost
    assert (SERVED, POD) in patched, patched
    assert [pod for pod in patched if pod[0] == OUTSIDE] == [], patched
    assert DELETION_COST_ANNOTATION not in outside_annotations, outside_annotations
    # The warning says what the runtime lacks, deletion costs among it, at start and in its /debug.
    [warning] = [line for line in log.read_text().splitlines() if " WARNING " in line and "--namespaces" in line]
    lacks = ("no pod-deletion cost is written on its pods: the adapter writes nothing outside --namespaces")
    assert lacks in warning, warning
    assert [w for w in outside_debug if "--namespaces" in w] == [warning.split(": ", 1)[1]], outside_debug
