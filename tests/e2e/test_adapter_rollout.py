"""A rolling upgrade of the adapter's two replicas as a platform engineer sees it, outside in: real adapter
processes in cluster mode (pods found through the fake Kubernetes API, real exporters on the pods' IPs, leader
election on one Lease), rolled the way the Deployment's strategy rolls them (`maxSurge: 1`, `maxUnavailable: 0`:
a new replica starts and becomes Ready, then an old one gets SIGTERM), while the HPA keeps asking and a
RuntimeScale changes in the middle.

What must hold, counted from the fake API server's request log rather than timed:
- never two writers: every pod-deletion-cost, ServingRuntime replicas or RuntimeScale status write comes from the
  replica holding the Lease (the replica bridge on, as cluster mode has it by default);
- no API burst: the new leaders find the costs the old ones left in place and write none of them again;
- the RuntimeScale's replicas set while the Lease changes hands reach the ServingRuntime;
- the HPA never sees a value below the replicas that run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.faults import RecordedRequest
from tests.support.processes import TEST_PROCESS_ENV, free_port

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
RUNTIME = "triton"
DEPLOYMENT = f"modelmesh-serving-{RUNTIME}"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
PODS = {"triton-hot": ("127.0.0.41", 300.0), "triton-warm": ("127.0.0.42", 120.0),
        "triton-idle": ("127.0.0.43", 0.0)}
LEASE = "modelmesh-autoscaler"
REPO = Path(__file__).resolve().parents[2]
IDENTITY = re.compile(r"holding Lease \S+; identity (\S+)")
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
          f"?labelSelector=servingruntime%3D{RUNTIME}")
# Short enough to roll in seconds; the ratios are the shipped ones (15/10/2 s).
ELECTION = ["--leader-elect", "true", "--leader-elect-lease-duration", "3",
            "--leader-elect-renew-deadline", "2", "--leader-elect-retry-period", "0.4"]


@dataclass
class Replica:
    """One `modelmesh-autoscaler serve` process, as one pod of the adapter's Deployment."""

    process: asyncio.subprocess.Process
    log: Path
    url: str

    @property
    def identity(self) -> str | None:
        match = IDENTITY.search(self.log.read_text())
        return match.group(1) if match else None

    async def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.process.returncode is None:
            self.process.send_signal(sig)
            try:
                async with asyncio.timeout(timeout_s):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode if self.process.returncode is not None else -1


@dataclass
class Cluster:
    kube: FakeKubeApi
    workdir: Path
    exporter_port: int
    replicas: list[Replica] = field(default_factory=list)

    async def start_replica(self, *more: str) -> Replica:
        port = free_port()
        log = self.workdir / f"adapter-{len(self.replicas)}.log"
        kubeconfig = self.kube.write_kubeconfig(self.workdir / "adapter.kubeconfig", namespace=NS)
        with log.open("wb") as output:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
                "--kubeconfig", str(kubeconfig), "--exporter-port", str(self.exporter_port),
                "--refresh-interval", "0.5", "--window", "3", "--shutdown-delay", "1s", "--bridge", "on", *ELECTION,
                *more,
                stdout=output, stderr=asyncio.subprocess.STDOUT, cwd=REPO, env={**os.environ, **TEST_PROCESS_ENV},
            )
        replica = Replica(process, log, f"https://127.0.0.1:{port}")
        self.replicas.append(replica)
        return replica


async def until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll without blocking the loop the fake API server runs on."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not within {timeout_s} s: {what}") from None


async def status(url: str) -> int | None:
    return (await answer(url))[0]


async def answer(url: str) -> tuple[int | None, str]:
    """(status, body) of one GET, or (None, the error) for a connection that was refused or dropped."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url, ssl=False) as response:
            return response.status, await response.text()
    except aiohttp.ClientError as error:
        return None, repr(error)


async def ready(replica: Replica, timeout_s: float = 60.0) -> None:
    """What the readiness probe waits for: /readyz answers 200, after the first refresh. That refresh runs at the
    test processes' priority (`TEST_PROCESS_ENV`): at the shipped niceness 10 it gets a tenth of their share, and
    two replicas took 13-16 s to be Ready at load 6 (4-8 s at niceness 0); at load 16 one was not Ready in 60 s."""
    async with asyncio.timeout(timeout_s):
        while await status(replica.url + "/readyz") != 200:
            if replica.process.returncode is not None:
                raise AssertionError(f"adapter exited:\n{replica.log.read_text()}")
            await asyncio.sleep(0.1)
    said = [line for line in replica.log.read_text().splitlines() if "refresh process niceness" in line]
    assert not said, said


def milli(quantity: str) -> int:
    """A served quantity ("6", "5500m") in thousandths."""
    return int(quantity[:-1]) if quantity.endswith("m") else 1000 * int(quantity)


def holder(kube: FakeKubeApi) -> str | None:
    lease = kube.get("leases", NS, LEASE)
    return (lease or {}).get("spec", {}).get("holderIdentity") or None


def costs(kube: FakeKubeApi) -> dict[str, str | None]:
    return {pod: kube.pod_annotations(NS, pod).get(DELETION_COST_ANNOTATION) for pod in PODS}


WRITTEN = ("pods", "servingruntimes", "runtimescales")
"""What the leader writes: deletion costs, the ServingRuntime's replicas, the RuntimeScale's status."""


def is_write(request: RecordedRequest) -> bool:
    """A change to what the leader writes that the server applied: the adapter sends PATCHes; any other verb
    from a replica not holding the Lease would be as wrong."""
    return (request.method in ("PATCH", "PUT", "POST", "DELETE") and request.resource in WRITTEN
            and request.status is not None and request.status < 300)


def writes_by_non_holders(requests: list[RecordedRequest]) -> list[str]:
    """Each cost or replica write, in the order the server applied it, whose writer did not hold the Lease
    then (the holder as the Lease writes before it left it)."""
    current: str | None = None
    wrong: list[str] = []
    applied = sorted((r for r in requests if r.answered is not None), key=lambda r: r.answered or 0)
    for request in applied:
        if (request.resource == "leases" and request.method in ("PUT", "POST") and request.status is not None
                and request.status < 300 and isinstance(request.body, dict)):
            current = (request.body.get("spec") or {}).get("holderIdentity") or None
        elif is_write(request):
            agent = request.headers.get("User-Agent", "")
            if current is None or current not in agent:
                wrong.append(f"{request.method} {request.path} by {agent} while {current} held the Lease")
    return wrong


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    runners: list[web.AppRunner] = []
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=len(PODS), labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        kube.add_serving_runtime(NS, RUNTIME, replicas=len(PODS))
        kube.add_runtime_scale(NS, RUNTIME, replicas=len(PODS))
        state = Cluster(kube, tmp_path, free_port())
        with contextlib.ExitStack() as stack:
            try:
                for name, (ip, rps) in PODS.items():
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=rps)), namespace=NS,
                        name=name, ip=ip, labels=SELECTOR, exporter_port=state.exporter_port, logs=tmp_path))
                yield state
            finally:
                for replica in state.replicas:
                    await replica.stop(signal.SIGKILL)
                for runner in runners:
                    await runner.cleanup()


async def test_a_rolling_upgrade_keeps_one_writer_writes_no_cost_again_and_carries_the_hpa_scale(
    cluster: Cluster,
) -> None:
    kube = cluster.kube
    old = [await cluster.start_replica() for _ in range(2)]
    for replica in old:
        await ready(replica)
    await until(lambda: holder(kube) is not None and all(costs(kube).values()), 60,
                "an old replica leads and every pod carries a cost")
    left = costs(kube)
    mark = len(kube.requests)

    served: list[tuple[int, int | None, str]] = []
    endpoints = list(old)  # the Service's Ready endpoints, as the aggregator routes the HPA's requests
    asking = True

    async def hpa() -> None:
        """The HPA's sync loop, sped up: every 0.2 s, one request to each endpoint."""
        while asking:
            for replica in list(endpoints):
                code, body = await answer(replica.url + METRIC)
                served.append((cluster.replicas.index(replica), code, body))
            await asyncio.sleep(0.2)

    polling = asyncio.create_task(hpa())
    try:
        # The leader is replaced first: its Lease changes hands twice, the worst order for a rollout.
        for index, previous in enumerate(sorted(old, key=lambda r: r.identity != holder(kube))):
            new = await cluster.start_replica()
            await ready(new)
            endpoints.append(new)
            endpoints.remove(previous)  # at once: the shutdown delay covers the real lag (test_rollout.py)
            previous.process.send_signal(signal.SIGTERM)
            if index == 0:  # the HPA raises the replicas while the Lease changes hands
                kube.update_object("runtimescales", NS, RUNTIME, lambda o: o["spec"].update(replicas=4))
            assert await previous.stop() == 0
        await until(lambda: holder(kube) in {r.identity for r in cluster.replicas[2:]}, 30, "a new replica leads")
        await until(lambda: kube.serving_runtime_replicas(NS, RUNTIME) == 4, 30,
                    "the scale set during the handover reaches the ServingRuntime")
        settled = len(kube.requests)
        await until(lambda: sum(1 for r in kube.requests[settled:] if r.resource == "leases") >= 10, 30,
                    "several more Lease renewals (each a few refreshes)")
    finally:
        asking = False
        await polling

    during = kube.requests[mark:]
    written = {(r.resource, r.path.endswith("/status")) for r in kube.requests if is_write(r)}
    assert {("pods", False), ("servingruntimes", False), ("runtimescales", True)} <= written, \
        f"each kind of write was made at least once, so that the next check looks at it: {written}"
    assert writes_by_non_holders(kube.requests) == []
    rewritten = [r.name for r in during if is_write(r) and r.resource == "pods"]
    assert rewritten == [], "the new leaders found every cost in place and wrote none again"
    assert costs(kube) == left
    assert served and [s for s in served if s[1] != 200] == []
    values = [milli(value) for *_, body in served for value in re.findall(r'"value": ?"(\d+m?)"', body)]
    assert len(values) == len(served) and min(values) >= values[0], "the HPA never saw a lowered value"
