"""Fixtures for the deletion-cost and leader-election tests: the shared fake Kubernetes API, a real client
pointed at it, a clock the test steps, and small builders of the views the refresh loop hands the writer."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.model import PodView, PodViews, RuntimeKey, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import MetricSource
from tests.actuation.lease_replica import Replica
from tests.fakes.kube import FakeKubeApi
from tests.support.clock import SteppedClock as SteppedClock  # re-exported: the actuation tests import it from here

KEY = RuntimeKey("ml", "modelmesh-serving-triton")


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as kube:
        yield kube


@pytest.fixture
def kubeconfig(kube: FakeKubeApi, tmp_path: Path) -> Path:
    return kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="ml")


@contextlib.contextmanager
def no_system_trust() -> Iterator[None]:
    """While a client of the plain http fake is built: its library builds an SSL context for every ApiClient,
    from the system's CA bundle unless the kubeconfig names a CA (and the fake's http kubeconfig has none). Over
    http the context is never used; reading the bundle cost 20-40 ms of CPU a client, most of a property test
    that connects a client per example. OpenSSL reads the bundle's path from `SSL_CERT_FILE`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", os.devnull)
        yield


async def connect(kubeconfig: Path, timeout_s: float) -> KubeClient:
    """The product's client of the fake from `kubeconfig`, as the adapter connects (`KubeClient.connect`)."""
    with no_system_trust():
        return await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=timeout_s)


@pytest.fixture
async def kube_client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    # A request's timeout well above what a loaded CI machine takes to answer hundreds of PATCHes from the fake in
    # this very event loop (2 s once timed 8 of 400 out and split a one-line test's log): no test here times out.
    client = await connect(kubeconfig, timeout_s=30.0)
    yield client
    await client.close()


@contextlib.asynccontextmanager
async def connected(kube: FakeKubeApi, namespace: str, timeout_s: float = 5.0) -> AsyncIterator[KubeClient]:
    """A client of `kube` for a test that starts its own fake (each example of a property), closed after."""
    with tempfile.TemporaryDirectory() as folder:
        config = kube.write_kubeconfig(Path(folder) / "kubeconfig", namespace=namespace)
        client = await connect(config, timeout_s)
    try:
        yield client
    finally:
        await client.close()


def pod_view(name: str, cost: int | None, *, ready: bool = True, fresh: bool = True) -> PodView:
    """A pod as the ranking left it: only what the writer reads is meaningful."""
    return PodView(
        name=name, ready=ready, fresh=fresh, age_s=1.0, gpu_busy=None, requests_per_second=None,
        queue_delay_s=None, lru_age_s=None, cache_used_ratio=None, weight=0.0,
        need=None if cost is None else cost / 1000, deletion_cost=cost,
    )


def runtime_view(
    pods: Iterable[PodView],
    *,
    key: RuntimeKey = KEY,
    desired: float | None = None,
    current: int | None = None,
    known: bool = True,
) -> RuntimeView:
    """A view with the given pods; `desired` is the served modelmesh_desired_replicas."""
    pods = PodViews.of(pods)
    return RuntimeView(
        key=key, refreshed_at=0.0, window_s=30.0, ready_pods=len(pods), fresh_pods=len(pods), coverage=1.0,
        complete=known, known=known,
        values={ServedMetric.DESIRED_REPLICAS: ServedValue(desired, desired, 0.0)},
        proposals={}, winner=None, pods=pods, current_replicas=current,
    )


def views_of(
    costs: dict[str, int], *, desired: float | None = None, current: int | None = None
) -> dict[RuntimeKey, RuntimeView]:
    """`{pod: cost}` as the views of one runtime."""
    view = runtime_view((pod_view(name, cost) for name, cost in costs.items()), desired=desired, current=current)
    return {view.key: view}


def add_pods(kube: FakeKubeApi, names: Iterable[str], namespace: str = KEY.namespace) -> None:
    for name in names:
        kube.add_pod(namespace, name, labels={"modelmesh-service": "modelmesh-serving", "name": KEY.deployment})


def caught_up(writer: DeletionCostWriter) -> bool:
    """Whether the pass that planned against the newest views offered (the last refresh's) has finished: its
    PATCHes sent and their answers taken in (`DeletionCostWriter.offers_passed`). A test that acts on what the
    writer did after a refresh (a tool putting its value back after each PATCH) waits for it: a fixed sleep let a
    loaded machine's pass, its PATCHes sent late, be answered a refresh late (CI: served 2 with the busiest pod
    at -1000)."""
    return writer.offers_passed >= writer.offers


def refresher_writing_costs(source: MetricSource, policy: RuntimePolicy, kube_client: KubeClient,
                            clock: SteppedClock) -> tuple[Refresher, DeletionCostWriter, AdapterMetrics]:
    """The real refresher and deletion-cost writer on `clock`, wired as the actuator wires them (the writer's pass
    runs after each refresh), the writer unthrottled and its jitter fixed so that runs repeat."""
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(policy), metrics, clock=clock, monotonic=clock)
    writer = DeletionCostWriter(kube_client, metrics, settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 1.0)
    refresher.cost_writes = writer
    return refresher, writer, metrics


@pytest.fixture
async def replicas() -> AsyncIterator[list[Replica]]:
    """The leader-election tests' replicas (tests.actuation.lease_replica), each stopped after the test."""
    started: list[Replica] = []
    yield started
    for replica in started:
        await replica.stop()
