"""The deletion-cost writer's promise about `--namespaces`: whatever runtimes the refresh hands it, in whatever
namespaces, it patches the Ready pods of the runtimes in the namespaces given and no pod elsewhere (empty: every
namespace). What the fake Kubernetes API server received, through the real client; the real `serve` keeps it in
tests/e2e/test_no_writes_outside_namespaces.py."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import SteppedClock, add_pods, connect, pod_view, runtime_view
from tests.fakes.kube import FakeKubeApi

NAMESPACES = ["team-a", "team-b", "team-c"]
DEPLOYMENT = "modelmesh-serving-triton"


def views_in(namespaces: set[str]) -> dict[RuntimeKey, RuntimeView]:
    """One runtime of two Ready pods in each namespace."""
    keys = [RuntimeKey(namespace, DEPLOYMENT) for namespace in sorted(namespaces)]
    return {key: runtime_view([pod_view("pod-0", 100), pod_view("pod-1", 900)], key=key) for key in keys}


async def written_after_one_pass(runtimes: set[str], served: list[str]) -> set[tuple[str | None, str]]:
    """The (namespace, pod) pairs patched by a writer bounded to `served`, handed one runtime in each of
    `runtimes`."""
    async with FakeKubeApi() as kube:
        for namespace in runtimes:
            add_pods(kube, ["pod-0", "pod-1"], namespace=namespace)
        with tempfile.TemporaryDirectory() as tmp:
            client = await connect(kube.write_kubeconfig(Path(tmp) / "kubeconfig"), timeout_s=2.0)
            try:
                writer = DeletionCostWriter(client, AdapterMetrics(), settings=WriterSettings(qps=None),
                                            clock=SteppedClock(), namespaces=served)
                writer.offer(views_in(runtimes))
                await writer.sync()
            finally:
                await client.close()
        return {(patch.namespace, patch.name) for patch in kube.patches}


@settings(max_examples=15, deadline=None)
@given(runtimes=st.sets(st.sampled_from(NAMESPACES)), served=st.lists(st.sampled_from(NAMESPACES), unique=True))
def test_only_the_pods_of_the_namespaces_given_are_patched(runtimes: set[str], served: list[str]) -> None:
    written = asyncio.run(written_after_one_pass(runtimes, served))

    allowed = set(served) or set(NAMESPACES)
    assert written == {(namespace, pod) for namespace in runtimes & allowed for pod in ("pod-0", "pod-1")}
