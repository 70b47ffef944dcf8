"""A pod's address or name taken by another pod while the adapter runs, as an operator sees it in /debug and
with `kubectl get --raw`: real exporters on the pods' own loopback IPs, the real adapter in cluster mode over
the fake Kubernetes API.

- Its node is lost, and the pod object still reads Ready (the node controller has not noticed yet) when a pod
  of another runtime starts on another node with the same IP (a cloud CNI hands a terminated instance's IPs
  out again at once). The address answers with the new pod's exporter: its load is the new pod's, never the
  lost pod's nor its runtime's.
- The same, but the new pod is not listed yet (its namespace's watch lags, or the adapter may not read it):
  only the exporter can tell. Its answer names its own pod, so it is refused for the lost pod (`other_pod` in
  /debug, one WARNING naming both pods and the address) and the lost pod holds its last good sample. An exporter
  that names no pod (one from before, or a sidecar without the variables: `triton-b` here) is read as always.
- A pod deleted and created again under the same name within the same second (a hand-made pod, a
  StatefulSet-like controller): the new pod has no reading yet, and the dead one's numbers are not held for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.api_peek import peek_raw
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
TRITON, ONNX = "modelmesh-serving-triton", "modelmesh-serving-onnx"
T = TypeVar("T")


def selector(deployment: str) -> dict[str, str]:
    return {"modelmesh-service": "modelmesh-serving", "name": deployment}


@dataclass
class Cluster:
    kube: FakeKubeApi
    workdir: Path
    exporter_port: int
    kubeconfig: Path = Path()
    pods: dict[str, tuple[contextlib.ExitStack, web.AppRunner]] = field(default_factory=dict)

    async def start_pod(self, name: str, deployment: str, ip: str, rps: float, *, identity: bool = True,
                        listed: bool = True) -> None:
        """A Ready pod of `deployment` at `ip` whose ModelMesh serves `rps`, its exporter answering there and
        naming its pod unless not `identity` (`cluster_pods.start_pod`; `listed=False`: not in the API)."""
        stack = contextlib.ExitStack()
        runner = await start_pod(stack, self.kube, FakeModelMesh(ModelMeshLoad(requests_per_second=rps)),
                                 namespace=NS, name=name, ip=ip, labels=selector(deployment),
                                 exporter_port=self.exporter_port, logs=self.workdir, identity=identity,
                                 listed=listed)
        self.pods[name] = (stack, runner)

    async def lose_node_of(self, name: str) -> None:
        """The pod's processes are gone; its object stays as it was (Ready, its IP), as when its node is lost."""
        stack, runner = self.pods.pop(name)
        await asyncio.to_thread(stack.close)
        await runner.cleanup()

    async def debug(self, deployment: str, *, peek: bool = False) -> dict[str, Any]:
        """/debug as kubectl reads it; `peek`: as the test process reads it, for waiting (`api_peek`)."""
        read = peek_raw if peek else get_raw
        code, document = await asyncio.to_thread(read, self.kubeconfig, f"/debug/runtimes/{NS}/{deployment}")
        assert code == 0, document
        return dict(document)

    async def pod_rps(self, deployment: str, *, peek: bool = False) -> dict[str, float | None]:
        """Each pod's request rate as /debug shows it (None: no fresh reading)."""
        document = await self.debug(deployment, peek=peek)
        return {pod["name"]: pod["requests_per_second"] if pod["fresh"] else None for pod in document["pods"]}


async def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    try:
        async with asyncio.timeout(timeout):
            while not (result := await check()):
                await asyncio.sleep(0.5)
            return result
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    adapter_port = free_port()
    async with FakeKubeApi() as kube:
        for deployment in (TRITON, ONNX):
            kube.add_deployment(NS, deployment, replicas=2, labels=selector(deployment), selector=selector(deployment),
                                annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        state = Cluster(kube, tmp_path, free_port())
        try:
            await state.start_pod("triton-a", TRITON, "127.0.0.71", 300.0)
            await state.start_pod("triton-b", TRITON, "127.0.0.72", 10.0, identity=False)  # an older sidecar
            await state.start_pod("onnx-a", ONNX, "127.0.0.73", 5.0)
            with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                          "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                          "--exporter-port", str(state.exporter_port), "--refresh-interval", "1", "--window", "3",
                          "--leader-elect", "false"],
                         f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"):
                state.kubeconfig = write_kubeconfig(tmp_path / "adapter.kubeconfig",
                                                    f"https://127.0.0.1:{adapter_port}")
                # At its rate, not at its first reading: an exporter's first rates come from two reads half a second
                # apart, and on a loaded machine they ran up to 1.4x (409 req/s for 300, 24 for 10), which the tests
                # below then took for triton-a's load (its held sample, what the runtime serves).
                await eventually(lambda: _within(state, TRITON, "triton-a", 250, 350), "triton-a's load is read")
                yield state
        finally:
            for name in list(state.pods):
                await state.lose_node_of(name)


async def _above(cluster: Cluster, deployment: str, pod: str, rps: float) -> bool:
    return await _within(cluster, deployment, pod, rps, float("inf"))


async def _within(cluster: Cluster, deployment: str, pod: str, low: float, high: float) -> bool:
    """Whether /debug shows `pod` fresh at a request rate above `low` and below `high` (False while it answers no
    document yet): as the test process reads it, for waiting; the tests assert on what kubectl reads next."""
    with contextlib.suppress(AssertionError):
        return low < ((await cluster.pod_rps(deployment, peek=True)).get(pod) or 0.0) < high
    return False


async def served_load(cluster: Cluster, deployment: str) -> float:
    """`modelmesh_request_load` of `deployment` as kubectl reads it."""
    code, load = await asyncio.to_thread(
        get_raw, cluster.kubeconfig,
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_request_load"
        f"?labelSelector=deployment%3D{deployment}")
    assert code == 0, load
    value: str = load["items"][0]["value"]
    return int(value[:-1]) / 1000 if value.endswith("m") else float(value)


async def test_a_lost_pods_ip_taken_by_another_runtimes_pod_is_read_as_the_new_pod_only(cluster: Cluster) -> None:
    # What kubectl reads before: about 424 = 2 x M2(300, 10) (triton-a at 300 req/s, triton-b at 10), more where
    # triton-a's first readings ran high on a loaded machine, which the slow fall (300 s) keeps. Held from the loss
    # on: triton-a holds its last good sample.
    before = await served_load(cluster, TRITON)
    await cluster.lose_node_of("triton-a")
    await cluster.start_pod("onnx-new", ONNX, "127.0.0.71", 900.0)  # triton-a's IP, triton-a still listed Ready
    await eventually(lambda: _above(cluster, ONNX, "onnx-new", 600), "the new pod's load is read")

    triton = await cluster.debug(TRITON)
    [lost] = [pod for pod in triton["pods"] if pod["name"] == "triton-a"]
    assert (lost["requests_per_second"] or 0) < 600, "the other runtime's pod was read as triton-a"
    problems = {problem["pod"]: problem for problem in triton["source"]["problems"]}
    assert "onnx-new" in problems["triton-a"]["detail"], problems
    # The new pod's 900 req/s read as triton-a's serves at least 2 x M2(600, 10) = 849 at once (a rise is served at
    # once); the value held moves only with the last readings before the loss, a few percent. It was asserted below
    # 600, which a loaded machine's first readings of triton-a passed with no address reused (704 in a run of
    # tests/e2e at -n 3; 580 before the loss in a probe).
    assert (after := await served_load(cluster, TRITON)) <= 1.1 * before, (before, after)


async def test_a_lost_pods_ip_taken_by_a_pod_not_listed_yet_is_refused_by_the_pod_its_exporter_names(
    cluster: Cluster,
) -> None:
    await cluster.lose_node_of("triton-a")
    # triton-a's IP, triton-a still listed Ready, the new pod not listed at all (its watch behind).
    await cluster.start_pod("onnx-new", ONNX, "127.0.0.71", 900.0, listed=False)
    url = f"http://127.0.0.71:{cluster.exporter_port}/metrics"

    async def read_or_refused(peek: bool = False) -> dict[str, Any] | None:
        triton = await cluster.debug(TRITON, peek=peek)
        [lost] = [pod for pod in triton["pods"] if pod["name"] == "triton-a"]
        refused = [p for p in triton["source"]["problems"] if p["pod"] == "triton-a" and p["reason"] == "other_pod"]
        return triton if (lost["requests_per_second"] or 0) > 600 or refused else None

    await eventually(lambda: read_or_refused(peek=True), "the address is read again")
    triton = await eventually(read_or_refused, "kubectl reads it so")
    [lost] = [pod for pod in triton["pods"] if pod["name"] == "triton-a"]
    assert (lost["requests_per_second"] or 0) < 600, "the unlisted pod's load was counted as triton-a's"
    assert 200 < lost["requests_per_second"] < 400, "triton-a's last good sample is held"
    [problem] = [p for p in triton["source"]["problems"] if p["pod"] == "triton-a"]
    assert problem["reason"] == "other_pod", problem
    assert f"{NS}/onnx-new" in problem["detail"] and url in problem["detail"], problem
    assert (await cluster.pod_rps(TRITON))["triton-b"] is not None, "an exporter naming no pod is read"

    logged = (cluster.workdir / "adapter.log").read_text()
    warnings = [line for line in logged.splitlines() if "WARNING" in line and "other_pod" in line]
    assert len(warnings) == 1, warnings
    assert "triton-a" in warnings[0] and f"{NS}/onnx-new" in warnings[0] and url in warnings[0], warnings


async def test_a_pod_created_again_under_its_name_in_the_same_second_gets_none_of_the_dead_pods_numbers(
    cluster: Cluster,
) -> None:
    created = datetime.strptime(cluster.kube.stored("pods", NS, "triton-a")["metadata"]["creationTimestamp"],
                                "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    await cluster.lose_node_of("triton-a")
    cluster.kube.delete_pod(NS, "triton-a")
    # Another pod of the name, as one second's timestamp reads it the same, on an address nothing answers yet.
    cluster.kube.add_pod(NS, "triton-a", labels={**selector(TRITON), "pod-template-hash": "abc"}, ip="127.0.0.74",
                         created=created)
    new_uid = cluster.kube.stored("pods", NS, "triton-a")["metadata"]["uid"]

    async def refused() -> bool:
        problems = (await cluster.debug(TRITON, peek=True))["source"]["problems"]
        return any(p["pod"] == "triton-a" and "127.0.0.74" in p["detail"] for p in problems)

    await eventually(refused, "the new pod's address is tried")
    assert cluster.kube.stored("pods", NS, "triton-a")["metadata"]["uid"] == new_uid
    assert (await cluster.pod_rps(TRITON))["triton-a"] is None, "the dead pod's reading was held for the new pod"
