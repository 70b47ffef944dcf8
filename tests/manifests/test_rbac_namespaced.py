"""The namespaced overlay (manifests/examples/namespaced/), held to the adapter's own calls as test_rbac.py holds the
base: a platform team serving some namespaces of a shared cluster wants the adapter to read only those.

A user adds a second namespace as the overlay's kustomization.yaml says (a copy of its RoleBinding, the namespace
in --namespaces), then a real `serve` runs with the rendered Deployment's --namespaces against the fake Kubernetes
API. Every request it makes is for one of those namespaces (or has none), each is granted by the overlay's roles
in every served namespace, no grant bound cluster-wide reaches into a namespace, and every grant is used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from pathlib import Path

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.manifests.support import MANIFESTS, kustomize
from tests.manifests.test_manifests import KUBERNETES_VERSIONS, adapter_deployment, serve_settings
from tests.manifests.test_rbac import BUILT_IN, NS, Call, _record_calls, allows, grants

pytestmark = pytest.mark.slow

OVERLAY = Path("examples/namespaced")
ADDED = "team-b"
"""The namespace the test adds as a user would, next to the overlay's own."""
CLUSTER_SCOPED = {"tokenreviews", "subjectaccessreviews", "clusterservingruntimes"}
ADAPTER_NAMESPACE = "modelmesh-autoscaler"  # its Lease
AUTHENTICATION_NAMESPACE = "kube-system"  # extension-apiserver-authentication


def serve_another_namespace(manifests: Path, namespace: str) -> Path:
    """The overlay in a copy of `manifests/`, serving `namespace` too, by the two steps its kustomization.yaml
    gives: a copy of its RoleBinding listed as a resource, and the namespace added to --namespaces."""
    overlay = manifests / OVERLAY
    binding = yaml.safe_load((overlay / "role-binding-modelmesh-serving.yaml").read_text())
    binding["metadata"]["namespace"] = namespace
    (overlay / f"role-binding-{namespace}.yaml").write_text(yaml.safe_dump(binding))
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    kustomization["resources"].append(f"role-binding-{namespace}.yaml")
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    patch_file = overlay / "deployment-namespaces-patch.yaml"
    [patch] = yaml.safe_load(patch_file.read_text())
    patch["value"] += f",{namespace}"
    patch_file.write_text(yaml.safe_dump([patch]))
    return overlay


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    manifests = tmp_path_factory.mktemp("manifests") / "manifests"
    shutil.copytree(MANIFESTS, manifests)
    return serve_another_namespace(manifests, ADDED)


@pytest.fixture(scope="module")
def served(overlay: Path) -> tuple[str, ...]:
    namespaces = serve_settings(adapter_deployment(overlay)).namespaces
    assert set(namespaces) == {NS, ADDED}, namespaces
    return namespaces


@pytest.fixture(scope="module")
def calls(served: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> set[Call]:
    """Every call the adapter made with the overlay's --namespaces while all its parts did their work once."""
    return asyncio.run(_record_calls(tmp_path_factory.mktemp("rbac-namespaced"), ["--namespaces", ",".join(served)]))


def in_every_served_namespace(calls: set[Call], served: tuple[str, ...]) -> set[Call]:
    """The calls, each one made in a served namespace repeated in every served namespace: a runtime there would
    make the same ones (the recorded run has its runtimes in one)."""
    return {dataclasses.replace(c, namespace=namespace) if c.namespace in served else c
            for c in calls for namespace in served}


def test_with_namespaces_the_adapter_asks_for_each_namespace_never_for_all(
        calls: set[Call], served: tuple[str, ...]) -> None:
    own = {*served, ADAPTER_NAMESPACE, AUTHENTICATION_NAMESPACE}
    across_all = sorted({(c.resource, c.verb) for c in calls
                         if c.namespace is None and c.resource not in CLUSTER_SCOPED})
    elsewhere = sorted({(c.namespace, c.resource) for c in calls if c.namespace is not None and c.namespace not in own})
    lists_in_the_empty_namespace = {(c.group, c.resource) for c in calls
                                    if c.namespace == ADDED and c.verb in ("list", "watch")}

    assert across_all == []
    assert elsewhere == []
    assert {("", "pods"), ("apps", "deployments"), ("autoscaling", "horizontalpodautoscalers"),
            ("autoscaler.modelmesh.io", "runtimescales")} <= lists_in_the_empty_namespace


def test_every_call_in_every_served_namespace_is_granted_by_the_overlay(
        calls: set[Call], served: tuple[str, ...], overlay: Path) -> None:
    bound = grants(overlay)
    refused = sorted(str(c) for c in in_every_served_namespace(calls, served)
                     if not any(allows(rule, namespace, c) for _, namespace, rule in bound))

    assert refused == []


def test_no_grant_bound_cluster_wide_reaches_into_a_namespace(
        calls: set[Call], served: tuple[str, ...], overlay: Path) -> None:
    """The base's ClusterRole read pods, Deployments, HPAs, RuntimeScales and ServingRuntimes in every namespace."""
    cluster_wide = [(role, rule) for role, namespace, rule in grants(overlay) if namespace is None]
    reaching = sorted({(role, c.resource, c.verb) for c in in_every_served_namespace(calls, served)
                       if c.namespace is not None for role, rule in cluster_wide if allows(rule, None, c)})

    assert reaching == []


def test_every_grant_of_the_overlays_roles_is_used(
        calls: set[Call], served: tuple[str, ...], overlay: Path) -> None:
    made = in_every_served_namespace(calls, served)
    unused = [
        (role, namespace, group, resource, verb)
        for role, namespace, rule in grants(overlay) if role not in BUILT_IN
        for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]
        if not any(allows({**rule, "apiGroups": [group], "resources": [resource], "verbs": [verb]}, namespace, c)
                   for c in made)
    ]

    assert unused == []


def test_the_shipped_overlay_serves_the_namespaces_it_binds() -> None:
    """Out of the box (no namespace added): --namespaces and the RoleBindings name the same namespaces."""
    directory = MANIFESTS / OVERLAY
    served = set(serve_settings(adapter_deployment(directory)).namespaces)
    bound = {o["metadata"]["namespace"] for o in kustomize(directory)
             if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == "modelmesh-autoscaler-runtime-namespace"}

    assert served == bound == {NS}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_what_the_overlay_changes_is_valid_for_kubernetes(version: str) -> None:
    """The objects it adds or patches (the rest are the base's, checked with it)."""
    base = kustomize(MANIFESTS / "base")
    changed = [o for o in kustomize(MANIFESTS / OVERLAY) if o not in base]

    assert {o["kind"] for o in changed} == {"ClusterRole", "RoleBinding", "Deployment"}
    for obj in changed:
        kubernetes_validate.validate(obj, version, strict=True)
