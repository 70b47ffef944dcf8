"""Which Deployment runs a pod, read from its controlling ReplicaSet (`parse_pod`'s `deployment`): the runtime
a pod counts for when its runtime scales to zero or back, whatever its labels. Promises: the Deployment
controller's naming (`<deployment>-<pod-template-hash>`) is read back exactly, and no pod JSON, however odd,
makes discovery fail: an owner that is not a Deployment's ReplicaSet reads as none."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.sources.kube_objects import parse_pod

DNS_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True)
HASH = st.from_regex(r"[a-z0-9]{6,10}", fullmatch=True)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def pod(labels: dict[str, Any], owners: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "labels": labels, "ownerReferences": owners}}


@given(deployment=DNS_LABEL, template_hash=HASH)
def test_a_deployments_pod_names_its_deployment(deployment: str, template_hash: str) -> None:
    owners = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{deployment}-{template_hash}",
               "uid": "u", "controller": True}]
    parsed = parse_pod(pod({"pod-template-hash": template_hash}, owners))
    assert parsed is not None and parsed.deployment == deployment


@given(name=st.text(max_size=30), template_hash=HASH, kind=st.sampled_from(["StatefulSet", "Job", "ReplicaSet"]),
       controller=st.sampled_from([True, False, None, "true"]))
def test_only_a_controlling_replica_set_named_for_the_hash_names_a_deployment(
    name: str, template_hash: str, kind: str, controller: Any
) -> None:
    parsed = parse_pod(pod({"pod-template-hash": template_hash},
                           [{"kind": kind, "name": name, "controller": controller}]))
    assert parsed is not None
    named = kind == "ReplicaSet" and controller is True and name.endswith(f"-{template_hash}") and \
        len(name) > len(template_hash) + 1
    assert parsed.deployment == (name[: -len(template_hash) - 1] if named else None)


@given(labels=st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=3), owners=JSONISH)
def test_no_owner_field_makes_a_pod_unreadable(labels: dict[str, str], owners: Any) -> None:
    parsed = parse_pod(pod(labels, owners))
    assert parsed is not None and (parsed.deployment is None or isinstance(parsed.deployment, str))
