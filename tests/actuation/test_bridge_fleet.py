"""The replica bridge at fleet size, as the API server sees it: a full pass reads three lists a namespace, not
two objects per RuntimeScale (10,000 sequential requests a pass at 5,000 runtimes, longer than the resync),
and an HPA's write to one RuntimeScale is carried alone, with no pass over the fleet."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter

import pytest

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi

NS = "ml"
RUNTIMES = 30


def fleet(kube: FakeKubeApi) -> None:
    """`RUNTIMES` runtimes as modelmesh-serving lays them out, each with its RuntimeScale asking for 3."""
    for i in range(RUNTIMES):
        kube.add_serving_runtime(NS, f"rt{i}", replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-rt{i}", replicas=2)
        kube.add_runtime_scale(NS, f"rt{i}", replicas=3)


def requests_since(kube: FakeKubeApi, start: int) -> Counter[tuple[str, str | None, bool]]:
    """(method, resource, is a list) of the requests the fake answered since request number `start`."""
    return Counter((r.method, r.resource, r.path.rstrip("/").endswith(f"/{r.resource}"))
                   for r in kube.requests[start:])


async def test_a_full_pass_reads_three_lists_not_two_objects_per_runtime_scale(
    kube: FakeKubeApi, kube_client: KubeClient,
) -> None:
    fleet(kube)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])

    start = len(kube.requests)
    assert await bridge.sync() == 2 * RUNTIMES  # each runtime's replicas carried and its status written
    assert all(kube.serving_runtime_replicas(NS, f"rt{i}") == 3 for i in range(RUNTIMES))
    assert requests_since(kube, start) == Counter({
        ("GET", "runtimescales", True): 1, ("GET", "servingruntimes", True): 1, ("GET", "deployments", True): 1,
        ("PATCH", "servingruntimes", False): RUNTIMES, ("PATCH", "runtimescales", False): RUNTIMES,
    })

    start = len(kube.requests)
    assert await bridge.sync() == 0  # the resync of a fleet in step: three requests
    assert sum(requests_since(kube, start).values()) == 3
    # The Deployments (whole pod templates, read for the status alone) come from the API server's watch cache,
    # not from etcd at every resync (where consistent reads are not served from the cache: before Kubernetes
    # 1.31); the RuntimeScales and ServingRuntimes, whose replicas the pass compares and writes, are read current.
    versions = {r.resource: r.query.get("resourceVersion") for r in kube.requests[start:]}
    assert versions == {"runtimescales": None, "servingruntimes": None, "deployments": "0"}


async def test_without_list_on_servingruntimes_the_pass_reads_them_one_by_one_and_says_so(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    """A ClusterRole from before the bridge listed ServingRuntimes grants only `get`: still bridged."""
    fleet(kube)
    kube.fail(r"/servingruntimes$", status=403, times=None, method="GET")
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    with caplog.at_level(logging.WARNING, logger="autoscaler.actuation.bridge"):
        await bridge.sync()
    assert all(kube.serving_runtime_replicas(NS, f"rt{i}") == 3 for i in range(RUNTIMES))
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith(f"replica bridge: cannot list ServingRuntimes in {NS}, reading them one by one: ")
    assert "403" in warning


async def test_an_hpa_write_is_carried_alone_without_a_pass_over_the_fleet(
    kube: FakeKubeApi, kube_client: KubeClient,
) -> None:
    fleet(kube)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    await bridge.sync()
    tasks = [asyncio.create_task(RuntimeScaleWatch(kube_client, NS, bridge.wake).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        tasks.append(asyncio.create_task(bridge.run()))  # its first pass: the watch's list asks for one
        async with asyncio.timeout(5):
            while sum(1 for r in kube.requests if r.resource == "runtimescales" and r.method == "GET") < 3:
                await asyncio.sleep(0.02)  # the watch's list, its watch, the first pass's list
        await asyncio.sleep(0.2)
        start = len(kube.requests)
        kube.update_object("runtimescales", NS, "rt7", lambda o: o["spec"].update(replicas=5))  # the HPA's write
        async with asyncio.timeout(5):
            while kube.serving_runtime_replicas(NS, "rt7") != 5:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # what else the write set off
        # Its runtime read and patched, its status patched (the message names the new replicas); that status
        # write, handed back by the watch, is known for the bridge's own. No lists.
        assert requests_since(kube, start) == Counter({
            ("GET", "servingruntimes", False): 1, ("GET", "deployments", False): 1,
            ("PATCH", "servingruntimes", False): 1, ("PATCH", "runtimescales", False): 1,
        })
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_new_leaders_first_pass_is_not_read_again_when_the_watch_hands_its_writes_back(
    kube: FakeKubeApi, kube_client: KubeClient,
) -> None:
    fleet(kube)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    tasks = [asyncio.create_task(RuntimeScaleWatch(kube_client, NS, bridge.wake).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        start = len(kube.requests)
        tasks.append(asyncio.create_task(bridge.run()))
        async with asyncio.timeout(10):
            while not all(kube.serving_runtime_replicas(NS, f"rt{i}") == 3 for i in range(RUNTIMES)):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # the watch hands back the RuntimeScales whose status the pass wrote
        made = requests_since(kube, start)
        assert made[("PATCH", "runtimescales", False)] == RUNTIMES  # every status written once
        assert made[("GET", "servingruntimes", False)] == 0 and made[("GET", "deployments", False)] == 0
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
