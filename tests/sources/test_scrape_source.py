"""The scrape source end to end: pods found through the (fake) Kubernetes API, real exporter processes
reading fake ModelMesh containers, and a watch stream that adds, readies and deletes pods.

Each pod gets its own loopback address (127.0.0.2, 127.0.0.3, ...) so that, as in a cluster, every
exporter answers on the same port of a different pod IP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes.aio.client import Configuration

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "default"
RUNTIME = RuntimeKey(NS, "modelmesh-serving-triton")
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": RUNTIME.deployment}


@dataclass
class Pod:
    name: str
    ip: str
    fake: FakeModelMesh


@dataclass
class Cluster:
    kube: FakeKubeApi
    exporter_port: int
    pods: dict[str, Pod]
    stack: contextlib.ExitStack
    runners: list[web.AppRunner]
    workdir: Path

    async def start_pod(self, name: str, ip: str, rps: float, ready: bool = True) -> Pod:
        """A fake ModelMesh and a real exporter on `ip`, then the pod object in the API."""
        fake = FakeModelMesh(ModelMeshLoad(requests_per_second=rps))
        mm_port = free_port()
        self.runners.append(await serve(fake, ip, mm_port))
        exporter = running(
            ["exporter.cli", "--listen", f"{ip}:{self.exporter_port}", "--no-gpu",
             "--modelmesh-url", f"http://{ip}:{mm_port}/metrics", "--modelmesh-interval", "0.3",
             "--load-window", "2"],
            f"http://{ip}:{self.exporter_port}/healthz", self.workdir / f"{name}.log",
        )
        await asyncio.to_thread(self.stack.enter_context, exporter)
        self.kube.add_pod(NS, name, labels={**SELECTOR, "pod-template-hash": "abc"}, ip=ip, ready=ready)
        self.pods[name] = Pod(name, ip, fake)
        return self.pods[name]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, RUNTIME.deployment, replicas=2, labels=SELECTOR, selector=SELECTOR)
        with contextlib.ExitStack() as stack:
            state = Cluster(kube, free_port(), {}, stack, [], tmp_path)
            try:
                yield state
            finally:
                for runner in state.runners:
                    await runner.cleanup()


@contextlib.asynccontextmanager
async def scrape_source(cluster: Cluster, clock: Callable[[], float] = time.time) -> AsyncIterator[ScrapeSource]:
    """The scrape source with pod discovery through the fake API; `clock` is the adapter's clock."""
    settings = Configuration()
    settings.host = cluster.kube.url
    discovery = KubePodDiscovery(settings, runtimes=[RUNTIME], discover=False, exporter_port=cluster.exporter_port,
                                 resync_interval_s=0.2, backoff_initial_s=0.05, backoff_max_s=0.2)
    await discovery.start()
    scrape = ScrapeSource(discovery, timeout_s=2.0, concurrency=4, clock=clock)
    try:
        yield scrape
    finally:
        await scrape.close()
        await discovery.close()


@pytest.fixture
async def source(cluster: Cluster) -> AsyncIterator[ScrapeSource]:
    async with scrape_source(cluster) as scrape:
        yield scrape


async def snapshot_until(source: ScrapeSource, check: Callable[[RuntimeSnapshot], bool],
                         timeout: float = 15.0) -> RuntimeSnapshot:
    last: RuntimeSnapshot | None = None
    async with asyncio.timeout(timeout):
        while True:
            snapshots = {s.key: s for s in await source.collect(asyncio.get_running_loop().time())}
            last = snapshots.get(RUNTIME)
            if last is not None and check(last):
                return last
            await asyncio.sleep(0.2)


def rates(snapshot: RuntimeSnapshot) -> dict[str, float | None]:
    return {pod.name: pod.requests_per_second for pod in snapshot.pods if pod.ready}


def near(value: float | None, expected: float) -> bool:
    return value is not None and abs(value - expected) <= 0.15 * expected


async def test_scrapes_every_ready_pod_the_api_lists(cluster: Cluster, source: ScrapeSource) -> None:
    await cluster.start_pod("triton-a", "127.0.0.2", rps=40)
    await cluster.start_pod("triton-b", "127.0.0.3", rps=120)

    snapshot = await snapshot_until(source, lambda s: near(rates(s).get("triton-a"), 40)
                                    and near(rates(s).get("triton-b"), 120))
    assert snapshot.source_ok
    assert snapshot.replicas == 2


async def test_watch_adds_readies_and_deletes_pods(cluster: Cluster, source: ScrapeSource) -> None:
    await cluster.start_pod("triton-a", "127.0.0.2", rps=40)
    await snapshot_until(source, lambda s: near(rates(s).get("triton-a"), 40))

    await cluster.start_pod("triton-c", "127.0.0.4", rps=90, ready=False)
    snapshot = await snapshot_until(source, lambda s: any(p.name == "triton-c" for p in s.pods))
    [pending] = [p for p in snapshot.pods if p.name == "triton-c"]
    assert not pending.ready and pending.sampled_at is None, "a pod that is not Ready is not scraped"

    cluster.kube.set_ready(NS, "triton-c", True)
    await snapshot_until(source, lambda s: near(rates(s).get("triton-c"), 90))

    cluster.kube.delete_pod(NS, "triton-a")
    snapshot = await snapshot_until(source, lambda s: all(p.name != "triton-a" for p in s.pods))
    assert [p.name for p in snapshot.pods] == ["triton-c"]


async def test_dead_exporter_keeps_its_last_good_sample(cluster: Cluster, source: ScrapeSource) -> None:
    await cluster.start_pod("triton-a", "127.0.0.2", rps=60)
    good = await snapshot_until(source, lambda s: near(rates(s).get("triton-a"), 60))
    [before] = good.pods
    cluster.kube.set_pod_ip(NS, "triton-a", "127.0.0.9")  # the exporter is now unreachable
    await asyncio.sleep(0.5)
    read: list[PodSample] = [before]  # each refresh's sample until the first failed scrape, and that one's

    def failed(snapshot: RuntimeSnapshot) -> bool:
        read.extend(snapshot.pods)
        return source.errors["connect"] > 0

    await snapshot_until(source, failed)
    *_, last_read, held = read
    assert held.requests_per_second == pytest.approx(before.requests_per_second)
    # The sample of the last refresh that reached the exporter, at its time: asked of that sample, not of a second
    # after `before` (a loaded machine saw the new address only seconds after it, and reads until then were good).
    assert held.sampled_at is not None
    assert held.sampled_at == last_read.sampled_at, "a failed scrape must not refresh the sample's time"


async def test_api_outage_marks_the_snapshot_not_ok(cluster: Cluster, source: ScrapeSource) -> None:
    await cluster.start_pod("triton-a", "127.0.0.2", rps=60)
    await snapshot_until(source, lambda s: near(rates(s).get("triton-a"), 60))
    await cluster.kube.pause()
    try:
        snapshot = await snapshot_until(source, lambda s: not s.source_ok)
        assert [p.name for p in snapshot.pods] == ["triton-a"], "the last known pods are kept"
    finally:
        await cluster.kube.resume()
    await snapshot_until(source, lambda s: s.source_ok)


async def test_a_pod_on_a_node_whose_clock_is_two_minutes_behind_counts_as_fresh(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    # The adapter's clock two minutes ahead of the exporter's is the same as the node's clock two minutes
    # behind. Before the exporter reported its clock, every sample of that pod looked two minutes old.
    def adapter_clock() -> float:
        return time.time() + 120.0

    await cluster.start_pod("triton-a", "127.0.0.2", rps=40)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    async with scrape_source(cluster, adapter_clock) as skewed:
        snapshot = await snapshot_until(skewed, lambda s: near(rates(s).get("triton-a"), 40))

    (pod,) = snapshot.pods
    now = adapter_clock()
    assert pod.sampled_at is not None and now - 5.0 < pod.sampled_at <= now  # the exporter collects every 0.3 s
    assert aggregate(snapshot.pods, RuntimePolicy(target_rps_per_pod=100.0), now).n == 1
    assert "the exporter's clock is 120." in caplog.text and "s behind the adapter's" in caplog.text
