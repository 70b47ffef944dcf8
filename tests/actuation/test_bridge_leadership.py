"""The replica bridge when its replica stops leading in the middle of a reconcile (the Lease not renewed within
the renew deadline during an API outage, or taken over). Leader election's promise (autoscaler.actuation.leader)
is that every write the old leader sent has landed or been abandoned before anyone may take over; it holds for
one call, so the bridge must not send the next write of a reconcile once `may_write` turned false."""

from __future__ import annotations

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"


async def test_no_write_of_a_reconcile_goes_out_after_leadership_is_lost(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=3)
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=3)
    kube.add_runtime_scale(NS, "triton", replicas=5)

    def leading() -> bool:  # the Lease's renew deadline passes while the ServingRuntime write is in flight
        return not any(patch.resource == "servingruntimes" for patch in kube.patches)

    bridge = ReplicaBridge(kube_client, namespaces=[NS], may_write=leading)
    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5  # sent while leading: it lands
    assert [(p.resource, p.name) for p in kube.patches] == [("servingruntimes", "triton")]  # nothing after it

    # A new term starts where the old one stopped: the status is written then.
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    await bridge.sync()
    assert (kube.stored("runtimescales", NS, "triton").get("status") or {}).get("replicas") is not None
