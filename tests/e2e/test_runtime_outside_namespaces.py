"""A policy-file runtime in a namespace that `--namespaces` leaves out is said at start, not half-served in silence.

`serve --namespaces team-a --config FILE` with FILE naming a runtime in team-c: the adapter read that Deployment
and watched team-c's pods (the file's runtimes are served wherever they are), but watched no HPA and no
RuntimeScale there, so the runtime got no HPA bounds and its RuntimeScale never reached its ServingRuntime; under
the namespaced RBAC overlay team-c's pod list is refused for good. Nothing said so. Now one WARNING at start
names the runtime, what it gets and does not, and what to write; and the fix it gives (team-c in
`--namespaces`) serves it fully.

The real `serve` against the fake Kubernetes API; what it watched is read off the requests the API received.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

DEPLOYMENT = "modelmesh-serving-triton"
SERVED, OUTSIDE = "team-a", "team-c"


async def start(tmp_path: Path, namespaces: str, *flags: str) -> Started:
    """Run `serve --namespaces NAMESPACES --config FILE` (FILE naming a runtime in each of team-a and team-c,
    each with an HPA on its RuntimeScale, the HPA asking 3 replicas of a ServingRuntime at 2) until the bridge
    has had its first pass in each served namespace and both runtimes were refreshed: what `Started` holds."""
    port = free_port()
    config = tmp_path / "policy.yaml"
    config.write_text("runtimes:\n" + "".join(f"  - {{namespace: {namespace}, deployment: {DEPLOYMENT}}}\n"
                                               for namespace in (SERVED, OUTSIDE)))
    log = tmp_path / "adapter.log"
    async with FakeKubeApi() as kube:
        for namespace in (SERVED, OUTSIDE):
            kube.add_modelmesh_runtime(namespace, DEPLOYMENT)
            kube.add_hpa(namespace, "triton", max_replicas=7, min_replicas=2, target=("RuntimeScale", "triton"),
                         metric_selector={"deployment": DEPLOYMENT})
            kube.add_serving_runtime(namespace, "triton", replicas=2)
            kube.add_runtime_scale(namespace, "triton", replicas=3)
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{port}",
                 "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                 "--namespaces", namespaces, "--config", str(config), "--leader-elect", "false", *flags],
                f"https://127.0.0.1:{port}/healthz", log))
            served = namespaces.split(",")
            async with asyncio.timeout(60):  # every served namespace's HPAs listed and, bridging, its 3 replicas set
                while not all(any((r.resource, r.namespace) == ("horizontalpodautoscalers", namespace)
                                  for r in kube.requests) for namespace in served) or not (
                        "--bridge" in flags or all(kube.serving_runtime_replicas(namespace, "triton") == 3
                                                   for namespace in served)):
                    await asyncio.sleep(0.2)
                adapter = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{port}")
                while len(found := await asyncio.to_thread(debug_warnings, adapter)) < 2:
                    await asyncio.sleep(0.2)
            asked = {(r.resource or "", r.namespace) for r in kube.requests if r.method == "GET"}
            replicas = kube.serving_runtime_replicas(OUTSIDE, "triton")
    return Started(log.read_text(), asked, replicas, found)


@dataclass(frozen=True)
class Started:
    log: str
    asked: set[tuple[str, str | None]]
    """The (resource, namespace) pairs the API server was asked for."""
    replicas: int | None
    """team-c's ServingRuntime replicas."""
    debug: dict[str, list[str]]
    """Each runtime's `warnings` in its /debug, by namespace."""


def debug_warnings(kubeconfig: Path) -> dict[str, list[str]]:
    """The `warnings` of /debug/runtimes/NS/DEPLOYMENT, read with kubectl, of the runtimes refreshed so far."""
    found = {}
    for namespace in (SERVED, OUTSIDE):
        code, document = get_raw(kubeconfig, f"/debug/runtimes/{namespace}/{DEPLOYMENT}")
        if code == 0:
            found[namespace] = list(document["warnings"])
    return found


def warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if " WARNING " in line and "--namespaces" in line]


async def test_a_runtime_outside_namespaces_is_named_once_at_start_with_what_it_lacks(tmp_path: Path) -> None:
    started = await start(tmp_path, SERVED)
    log, asked, replicas = started.log, started.asked, started.replicas

    [warning] = warnings(log)
    config = tmp_path / "policy.yaml"
    assert (f"--config {config} names runtime {OUTSIDE}/{DEPLOYMENT}, whose namespace {OUTSIDE} is not in "
            f"--namespaces {SERVED}: its pods are watched and its values served, but its HPA's minReplicas and "
            "maxReplicas are not read and its RuntimeScale is not bridged to its ServingRuntime") in warning, warning
    assert f"Add {OUTSIDE} to --namespaces" in warning and "RoleBinding" in warning, warning
    assert f"{SERVED}/{DEPLOYMENT}" not in warning, warning
    # What it says is what happened: team-c's pods watched, its HPAs and RuntimeScales not; the HPA's 3 replicas
    # never reached its ServingRuntime.
    assert ("pods", OUTSIDE) in asked, asked
    assert ("horizontalpodautoscalers", SERVED) in asked and ("runtimescales", SERVED) in asked, asked
    assert {resource for resource, namespace in asked if namespace == OUTSIDE} == {"pods", "deployments"}, asked
    assert replicas == 2
    # Its /debug says it too, for whoever looks at the runtime rather than the start log; team-a's says nothing.
    assert [w for w in started.debug[OUTSIDE] if "--namespaces" in w] == [warning.split(": ", 1)[1]], started.debug
    assert not any("--namespaces" in w for w in started.debug[SERVED]), started.debug


async def test_with_the_bridge_off_the_warning_does_not_blame_the_bridge(tmp_path: Path) -> None:
    [warning] = warnings((await start(tmp_path, SERVED, "--bridge", "off")).log)
    assert "its HPA's minReplicas and maxReplicas are not read;" in warning, warning
    assert "RuntimeScale" not in warning, warning


async def test_with_the_namespace_added_as_the_warning_says_the_runtime_is_served_fully(tmp_path: Path) -> None:
    started = await start(tmp_path, f"{SERVED},{OUTSIDE}")

    assert warnings(started.log) == [], started.log
    assert not any("--namespaces" in w for found in started.debug.values() for w in found), started.debug
    assert {("horizontalpodautoscalers", OUTSIDE), ("runtimescales", OUTSIDE)} <= started.asked, started.asked
    assert started.replicas == 3  # the HPA's replicas reach team-c's ServingRuntime
