"""What `kubectl get --raw` says for a runtime the adapter does not know, in cluster mode (runtimes found through
the fake Kubernetes API): the 404's message must point at what to change. It said "or not in its targets", which
means nothing without `--targets`, and did not name `--namespaces` (a runtime in a namespace the adapter does not
watch), nor that `servingruntime=` takes the ServingRuntime's name (`servingruntime=modelmesh-serving-triton` asked
for the Deployment `modelmesh-serving-modelmesh-serving-triton`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

WATCHED, OTHER = "team-a", "team-b"
DEPLOYMENT = "modelmesh-serving-triton"
LABELS = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    """An adapter discovering runtimes in `team-a` only; the same runtime exists in `team-b` too."""
    port = free_port()
    async with FakeKubeApi() as kube:
        for namespace in (WATCHED, OTHER):
            kube.add_deployment(namespace, DEPLOYMENT, replicas=0, labels=LABELS, selector=LABELS)
        with running(
            ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
             "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
             "--namespaces", WATCHED, "--refresh-interval", "1", "--leader-elect", "false"],
            f"https://127.0.0.1:{port}/healthz", tmp_path / "adapter.log",
        ):
            yield write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{port}")


async def kubectl_get(kubeconfig: Path, namespace: str, selector: str) -> tuple[int, object]:
    path = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/modelmesh_desired_replicas"
            f"?labelSelector={selector}")
    # Until the adapter has values: before its first refresh, and while a refresh starved of CPU is late (on a
    # loaded CI machine the adapter's stall guard answered "not been refreshed for 12 s" once and the test took
    # that for the answer), it answers 503 with no word on the runtime. A generous deadline, not a count of tries.
    deadline = time.monotonic() + 120
    while True:
        code, body = await asyncio.to_thread(get_raw, kubeconfig, path)
        if "first refresh" not in str(body) and "have not been refreshed" not in str(body):
            return code, body
        if time.monotonic() > deadline:
            raise AssertionError(f"no refresh: {body}")
        await asyncio.sleep(0.5)


async def test_a_runtime_outside_namespaces_is_said_to_be_outside_them(kubeconfig: Path) -> None:
    code, message = await kubectl_get(kubeconfig, OTHER, f"deployment%3D{DEPLOYMENT}")
    assert code != 0 and "NotFound" in str(message), message
    assert "--namespaces" in str(message), message


async def test_servingruntime_given_the_deployment_name_says_to_give_the_servingruntime_name(
    kubeconfig: Path,
) -> None:
    code, message = await kubectl_get(kubeconfig, WATCHED, f"servingruntime%3D{DEPLOYMENT}")
    assert code != 0 and "NotFound" in str(message), message
    assert "servingruntime=triton" in str(message), message
