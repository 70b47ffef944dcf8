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


async def test_a_leader_again_finds_the_owner_deleted_while_it_did_not_lead(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """Who owns a runtime is forgotten while not leading and learnt again from the next term's lists: the copy of
    a RuntimeScale deleted meanwhile owns the runtime then, and its replicas reach it (not "owned by" the gone one)."""
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=2)
    kube.clock = lambda: 1_700_000_000
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.clock = lambda: 1_700_000_100
    kube.add_runtime_scale(NS, "copy", serving_runtime="triton", replicas=3)
    leads = True
    bridge = ReplicaBridge(kube_client, namespaces=[NS], may_write=lambda: leads)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 5  # the older one owns it

    leads = False
    await bridge.sync()
    kube.delete_object("runtimescales", NS, "triton")
    leads = True
    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 3
    [ready] = [c for c in kube.stored("runtimescales", NS, "copy")["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "True", ready
