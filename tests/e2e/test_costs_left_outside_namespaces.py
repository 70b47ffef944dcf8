"""Deletion costs an earlier release left on the pods of a runtime outside `--namespaces`, after the upgrade.

ecc8de1's leader wrote `controller.kubernetes.io/pod-deletion-cost` on a policy-file runtime's pods outside
`--namespaces`; this release writes none there, and so never rewrites them: the reviewer's run kept 700 / 200 on
two pods whose load had swapped, the ReplicaSet about to remove the only busy one, while the start-up warning said
only "no pod-deletion cost is written" and /debug ranked the pods 500 / 700 as though those costs were written.
Now the adapter still writes nothing there, but says which costs are left (once in the log, and in the runtime's
/debug while they are there) with the command that removes them; /debug's per-pod `deletion_cost` is null. The
command, run with the real kubectl against the fake API server, removes them, and the warning goes.

The real `serve` over the fake Kubernetes API, real exporters on the pods' IPs; the old leader's costs are set on
the pods as it left them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.e2e.cluster_pods import start_pod
from tests.e2e.test_no_writes_outside_namespaces import DEPLOYMENT, OUTSIDE, SELECTOR, SERVED, until
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import KUBECTL, get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

PODS = {"triton-0": ("127.0.0.16", 0.0, "700"), "triton-1": ("127.0.0.17", 150.0, "200")}
"""Name: (IP, load now, the cost ecc8de1's leader left when triton-0 was the busy one)."""
COMMAND = re.compile(r"`(kubectl -n \S+ annotate pods -l \S+ " + re.escape(DELETION_COST_ANNOTATION) + r"-)`")


def left_by_the_old_leader(pod: dict[str, Any], cost: str) -> None:
    pod["metadata"].setdefault("annotations", {})[DELETION_COST_ANNOTATION] = cost


def debug(kubeconfig: Path) -> dict[str, Any]:
    code, document = get_raw(kubeconfig, f"/debug/runtimes/{OUTSIDE}/{DEPLOYMENT}")
    assert code == 0, document
    return dict(document)


def left_costs_warning(kubeconfig: Path) -> str | None:
    """The runtime's /debug warning of the costs left on its pods (None: none)."""
    said = [warning for warning in debug(kubeconfig)["warnings"] if "carry pod-deletion costs" in warning]
    return said[0] if said else None


async def test_costs_left_outside_namespaces_are_named_with_the_command_that_removes_them(tmp_path: Path) -> None:
    exporter_port, adapter_port = free_port(), free_port()
    config = tmp_path / "policy.yaml"
    config.write_text(f"runtimes:\n  - {{namespace: {OUTSIDE}, deployment: {DEPLOYMENT}}}\n")
    log = tmp_path / "adapter.log"
    runners: list[web.AppRunner] = []
    async with FakeKubeApi() as kube:
        for namespace in (OUTSIDE, SERVED):
            kube.add_deployment(namespace, DEPLOYMENT, replicas=len(PODS), labels=SELECTOR, selector=SELECTOR,
                                annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        cluster = kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")
        with contextlib.ExitStack() as stack:
            try:
                for name, (ip, rps, cost) in PODS.items():
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=rps)), namespace=OUTSIDE,
                        name=name, ip=ip, labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                    kube.update_object("pods", OUTSIDE, name, functools.partial(left_by_the_old_leader, cost=cost))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0",
                     "--listen", f"127.0.0.1:{adapter_port}", "--kubeconfig", str(cluster),
                     "--namespaces", SERVED, "--config", str(config), "--exporter-port", str(exporter_port),
                     "--refresh-interval", "1", "--window", "3", "--leader-elect", "false"],
                    f"https://127.0.0.1:{adapter_port}/healthz", log))
                adapter = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")
                warning = await until(lambda: left_costs_warning(adapter))
                pods = await until(lambda: [p for p in debug(adapter)["pods"] if p["fresh"]] or None)
                command = COMMAND.search(warning)
                assert command is not None, warning
                removed = await asyncio.to_thread(
                    subprocess.run, [KUBECTL, "--kubeconfig", str(cluster), *command.group(1).split()[1:]],
                    capture_output=True, text=True, timeout=30)
                assert removed.returncode == 0, removed.stderr
                await until(lambda: left_costs_warning(adapter) is None)
                after = {name: kube.pod_annotations(OUTSIDE, name) for name in PODS}
            finally:
                for runner in runners:
                    await runner.cleanup()
        outside_patches = [p for p in kube.patches if p.resource == "pods" and p.namespace == OUTSIDE]

    assert "triton-0 700, triton-1 200" in warning, warning
    assert f"kubectl -n {OUTSIDE} annotate pods -l modelmesh-service=modelmesh-serving,name={DEPLOYMENT} " \
           f"{DELETION_COST_ANNOTATION}-" in warning, warning
    assert f"add {OUTSIDE} to --namespaces" in warning, warning
    # Said once in the log, however many refreshes saw the costs.
    assert [line.split(": ", 1)[1] for line in log.read_text().splitlines()
            if " WARNING " in line and "carry pod-deletion costs" in line] == [warning]
    # /debug ranks the pods (`need`) but shows no cost as if one were written there.
    assert len(pods) == len(PODS) and all(pod["deletion_cost"] is None for pod in pods), pods
    # ... and the costs the pods carry, by which the ReplicaSet removes them, beside it.
    assert {pod["name"]: pod["deletion_cost_on_pod"] for pod in pods} == {
        name: int(cost) for name, (_, _, cost) in PODS.items()}, pods
    # The adapter wrote nothing there: only kubectl's removal patched those pods.
    assert all(DELETION_COST_ANNOTATION not in annotations for annotations in after.values()), after
    assert sorted(p.name for p in outside_patches) == sorted(PODS), outside_patches
