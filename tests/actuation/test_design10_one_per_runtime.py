"""DESIGN §10: "one [RuntimeScale] per ServingRuntime". Two RuntimeScales that name the same ServingRuntime
(a copy applied under another name, each with its HPA) must not both carry their `spec.replicas` to it: the
runtime would flip between the two asks on every pass, and modelmesh-serving would start and stop pods each
time, while both RuntimeScales said Ready=True "follows this RuntimeScale"."""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"


def ready(kube: FakeKubeApi, name: str) -> dict[str, Any]:
    [condition] = [c for c in kube.stored("runtimescales", NS, name)["status"]["conditions"] if c["type"] == "Ready"]
    return condition  # type: ignore[no-any-return]


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock) -> ReplicaBridge:
    return ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)


async def test_two_runtime_scales_on_one_serving_runtime_do_not_flip_its_replicas(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock,
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=2)
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.add_runtime_scale(NS, "triton-copy", serving_runtime="triton", replicas=3)

    replicas_seen = []
    writes = 0
    for _ in range(3):
        kube.clear_requests()
        await bridge.sync()
        writes += sum(1 for r in kube.requests if r.method == "PATCH" and "servingruntimes" in r.path)
        replicas_seen.append(kube.serving_runtime_replicas(NS, "triton"))
        clock.advance(60.0)

    conditions = {name: ready(kube, name) for name in ("triton", "triton-copy")}
    assert writes == 1, replicas_seen  # one value carried, once; not one write per RuntimeScale per pass
    assert len(set(replicas_seen)) == 1
    assert sorted(c["status"] for c in conditions.values()) == ["False", "True"]
    [refused] = [name for name, c in conditions.items() if c["status"] == "False"]
    other = "triton" if refused == "triton-copy" else "triton-copy"
    assert other in conditions[refused]["message"]
