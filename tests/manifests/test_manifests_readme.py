"""manifests/README.md's folder table is where a user picks what to apply: every folder that `kubectl apply -k`
takes has its row, and the row names what the folder installs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.manifests.support import find, kustomize, load_yaml

REPO = Path(__file__).resolve().parent.parent.parent
MANIFESTS = REPO / "manifests"
README = (MANIFESTS / "README.md").read_text()
KUSTOMIZATION_FILES = sorted(MANIFESTS.rglob("kustomization.yaml"))
FOLDERS = [p.parent for p in KUSTOMIZATION_FILES if load_yaml(p)["kind"] != "Component"]
"""What `kubectl apply -k` takes: not a kustomize Component, which only a kustomization adds."""
COMPONENTS = [p.parent for p in KUSTOMIZATION_FILES if p.parent not in FOLDERS]

# How the table says a kind in words: the RBAC objects together, the CRD by the resource it defines.
IN_WORDS = {
    "ServiceAccount": "RBAC", "ClusterRole": "RBAC", "ClusterRoleBinding": "RBAC", "Role": "RBAC",
    "RoleBinding": "RBAC", "CustomResourceDefinition": "RuntimeScale", "ValidatingAdmissionPolicy": "admission policy",
    "ValidatingAdmissionPolicyBinding": "admission policy", "ConfigMap": "policy ConfigMap",
    "HorizontalPodAutoscaler": "HPA", "Secret": "token",
}


def folder_rows() -> dict[str, str]:
    """folder (`base/`) -> the rest of its row in the table."""
    rows = re.findall(r"^\| `([\w/-]+/)` \| (.*) \|$", README, flags=re.M)
    return dict(rows)


def own_kinds(folder: Path) -> set[str]:
    """The kinds of the objects a folder adds itself (an overlay's base is the base's row)."""
    text = (folder / "kustomization.yaml").read_text()
    inherits = re.search(r"^\s*-\s*\.\./", text, flags=re.M)
    kinds = {obj["kind"] for obj in kustomize(folder)}
    if inherits:
        kinds -= {obj["kind"] for obj in kustomize(MANIFESTS / "base")}
    return kinds


def test_every_folder_kubectl_applies_has_a_row() -> None:
    """The table had no row for `examples/keda/`, the folder a cluster with KEDA must apply instead of the base."""
    rows = folder_rows()
    missing = [str(f.relative_to(MANIFESTS)) + "/" for f in FOLDERS if str(f.relative_to(MANIFESTS)) + "/" not in rows]
    assert not missing, f"manifests/README.md's table has no row for {missing}"


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda f: str(f.relative_to(MANIFESTS)))
def test_each_component_is_named_in_the_row_of_the_folder_that_holds_it(component: Path) -> None:
    """examples/keda/component is what a KEDA user adds to an overlay that holds the APIService: the table, where
    a user picks what to apply, names it."""
    holder = max((f for f in FOLDERS if f in component.parents), key=lambda f: len(f.parts))
    row = folder_rows().get(str(holder.relative_to(MANIFESTS)) + "/", "")
    assert f"`{component.relative_to(holder)}/`" in row, f"the row of {holder.name}/ does not name its component"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(MANIFESTS)))
def test_each_row_names_what_its_folder_installs(folder: Path) -> None:
    """The base's row left out the RuntimeScale CRD and the admission policy; the examples' row the
    RuntimeScale and the NetworkPolicy."""
    row = folder_rows().get(str(folder.relative_to(MANIFESTS)) + "/", "")
    unnamed = sorted(kind for kind in own_kinds(folder) if IN_WORDS.get(kind, kind) not in row)
    assert not unnamed, f"manifests/README.md's row for {folder.name}/ does not name {unnamed}: {row}"


def test_the_exporter_network_policy_is_installed_per_namespace_as_the_guides_say() -> None:
    """The README had a user copy `network-policy-exporter.yaml` for each runtime "with its names", though it
    selects every runtime pod of its namespace: one per namespace, which deleting the example removes for all."""
    policy = find(kustomize(MANIFESTS / "examples"), "NetworkPolicy", "modelmesh-autoscaler-exporter")
    selector = policy["spec"]["podSelector"]
    runtime_specific = {"name", "modelmesh-service"} & set(selector.get("matchLabels", {}))
    assert not runtime_specific, "the policy selects one runtime's pods: the guides' per-namespace advice is wrong"
    walkthrough = (REPO / "README.md").read_text().split("**4. Scale a runtime.**", 1)[1].split("**5.", 1)[0]
    per_runtime = walkthrough.split("For a runtime of your own", 1)[1].split("with its names", 1)[0]
    assert "network-policy-exporter.yaml" not in per_runtime, per_runtime
    assert "one per namespace" in " ".join(walkthrough.split())
    assert "one per runtime namespace" in " ".join(README.split())
