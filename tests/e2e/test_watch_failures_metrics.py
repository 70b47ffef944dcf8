"""The adapter's watches failing, as its own /metrics shows them to an operator.

The HPA watch (the replica bounds), the RuntimeScale watch (the bridge's wake-ups) and pod discovery run for the
adapter's whole life. An RBAC change that refuses the HPA or RuntimeScale watch with 403, an API server that drops
the streams: nothing in /metrics said so (only pod discovery had `discovery_healthy`, and the bridge's leader its
list failures); an operator saw it in the log alone. Now `modelmesh_autoscaler_watch_failures_total{watch,reason}`
counts each failure by its cause, and `modelmesh_autoscaler_watch_established{watch,namespace}` says which watch is
open.

The real `serve` over the fake Kubernetes API, its /metrics read over HTTPS as Prometheus reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import adapter_metrics
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
FAILURES = "modelmesh_autoscaler_watch_failures_total"
ESTABLISHED = "modelmesh_autoscaler_watch_established"


def watch_series(adapter: str) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """(failures by (watch, reason), established by (watch, namespace)) from the adapter's /metrics."""
    failures: dict[tuple[str, str], float] = {}
    established: dict[tuple[str, str], float] = {}
    for sample in adapter_metrics(adapter):
        if sample.name == FAILURES:
            failures[sample.labels["watch"], sample.labels["reason"]] = sample.value
        elif sample.name == ESTABLISHED:
            established[sample.labels["watch"], sample.labels["namespace"]] = sample.value
    return failures, established


async def scraped_until(adapter: str, wanted: Callable[[dict[tuple[str, str], float], dict[tuple[str, str], float]],
                                                        bool], timeout: float = 60.0) -> tuple[
        dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """Scrape until `wanted(failures, established)`; else fail with the last scrape, which says why."""
    last: tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]] = ({}, {})
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while not wanted(*(last := await asyncio.to_thread(watch_series, adapter))):
                await asyncio.sleep(0.5)
            return last
    raise AssertionError(f"after {timeout:g} s still {last}")



@contextlib.asynccontextmanager
async def serving(kube: FakeKubeApi, tmp_path: Path) -> AsyncIterator[str]:
    """`serve --namespaces ml` (the bridge on, no leader election, deletion costs off) over `kube`, running: its
    host:port."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        await asyncio.to_thread(stack.enter_context, running(
            ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
             "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")), "--namespaces", NS,
             "--refresh-interval", "1", "--leader-elect", "false", "--deletion-cost", "off"],
            f"https://127.0.0.1:{port}/healthz", tmp_path / "adapter.log"))
        yield f"127.0.0.1:{port}"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKubeApi, str]]:
    """`serve --namespaces ml` (the bridge on, no leader election) whose ClusterRole lost list and watch on HPAs and
    watch on RuntimeScales, and list on Deployments: the fake API and the adapter's host:port."""
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR)
        for verb in ("list", "watch"):
            kube.forbid(verb, "horizontalpodautoscalers", NS)
        kube.forbid("watch", "runtimescales", NS)
        kube.forbid("list", "deployments", NS)
        async with serving(kube, tmp_path) as adapter:
            yield kube, adapter


async def test_refused_and_dropped_watches_are_counted_by_cause_and_their_state_served(
    cluster: tuple[FakeKubeApi, str],
) -> None:
    kube, adapter = cluster
    # Refused by RBAC: counted as `forbidden`, again at each retry, and not established; pod discovery, allowed, is.
    failures, established = await scraped_until(adapter, lambda failures, established: (
        failures.get(("hpas", "forbidden"), 0) >= 2 and failures.get(("runtimescales", "forbidden"), 0) >= 2
        and failures.get(("deployments", "forbidden"), 0) >= 1 and established.get(("pods", NS)) == 1))
    assert established[("hpas", NS)] == 0 and established[("runtimescales", NS)] == 0, established
    assert failures[("pods", "forbidden")] == 0 and failures[("hpas", "server_error")] == 0, failures
    assert ("deployments", NS) not in established, established  # read on a timer, not watched
    # Every cause of each loop is a series from the start (an alert's increase() sees the first failure).
    reasons = {"forbidden", "refused", "throttled", "server_error", "no_answer", "expired", "unexpected"}
    for watch in ("hpas", "runtimescales", "pods", "deployments"):
        assert {reason for kind, reason in failures if kind == watch} == reasons, failures

    kube.clear_faults()  # the ClusterRole restored
    failures, established = await scraped_until(adapter, lambda failures, established: all(
        established.get((watch, NS)) == 1 for watch in ("hpas", "runtimescales", "pods")))
    refused = failures[("hpas", "forbidden")]

    kube.end_watches(abort=True)  # the API server drops every stream, as one dying does
    failures, established = await scraped_until(adapter, lambda failures, established: (
        failures.get(("pods", "no_answer"), 0) >= 1 and failures.get(("hpas", "no_answer"), 0) >= 1
        and all(established.get((watch, NS)) == 1 for watch in ("hpas", "runtimescales", "pods"))))
    assert failures[("hpas", "forbidden")] == refused, failures

    kube.end_watches()  # the streams end, and the version they would resume from is compacted away meanwhile
    kube.add_pod(NS, "triton-0", labels={**SELECTOR, "pod-template-hash": "abc"})
    kube.compact()
    failures, established = await scraped_until(adapter, lambda failures, established: (
        failures.get(("pods", "expired"), 0) >= 1 and established.get(("pods", NS)) == 1))
    assert failures[("pods", "unexpected")] == 0, failures
