"""What the KEDA overlay's comments tell a KEDA user to apply. KEDA owns the cluster's one
`v1beta1.external.metrics.k8s.io` APIService; an overlay that holds that APIService replaces KEDA's on
`kubectl apply` and stops every ScaledObject in the cluster. So a comment in manifests/examples/keda may name
such an overlay only to say not to apply it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from tests.manifests.support import CERT_MANAGER, KEDA, MANIFESTS, Object, kustomize

OVERLAY = re.compile(r"(?:manifests/)?(examples/[\w-]+(?:/[\w-]+)*)/?")
WARNING = re.compile(r"\b(?:do not|never|not) apply\b", re.I)


def comment_sentences(path: Path) -> list[str]:
    """The comments of a manifest file, joined and split into sentences."""
    text = " ".join(line.split("#", 1)[1].strip() for line in path.read_text().splitlines() if "#" in line)
    return [s for s in re.split(r"(?<=[.:;])\s+(?=[A-Z(])", text) if s]


def registers_the_api_service(directory: Path) -> bool:
    return any(obj["kind"] == "APIService" for obj in kustomize(directory))


def test_the_keda_overlay_never_sends_a_keda_user_to_apply_an_overlay_with_the_api_service() -> None:
    offending = []
    for path in sorted(KEDA.glob("*.yaml")):
        for sentence in comment_sentences(path):
            for match in OVERLAY.finditer(sentence):
                directory = MANIFESTS / match.group(1)
                if not (directory / "kustomization.yaml").exists() or directory == KEDA:
                    continue
                if registers_the_api_service(directory) and not WARNING.search(sentence):
                    offending.append(f"{path.name}: {sentence}")
    assert not offending, "points a KEDA user at an overlay holding the APIService:\n" + "\n".join(offending)


def test_the_overlay_the_docs_describe_for_keda_with_cert_manager_builds_without_the_api_service(
        tmp_path: Path) -> None:
    """docs/operations.md (KEDA, TLS): a copy of examples/cert-manager whose kustomization drops the APIService
    patch, deletes the APIService as the KEDA overlay does and lists copies of the KEDA overlay's files."""
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS / "base", manifests / "base")
    mine = manifests / "examples" / "mine"
    shutil.copytree(MANIFESTS / "examples" / "cert-manager", mine)
    keda = yaml.safe_load((KEDA / "kustomization.yaml").read_text())
    for name in [*(r for r in keda["resources"] if not r.startswith("..")), "api-service-delete.yaml"]:
        shutil.copy(KEDA / name, mine / name)
    kustomization = yaml.safe_load((mine / "kustomization.yaml").read_text())
    kustomization["resources"] += [r for r in keda["resources"] if not r.startswith("..")]
    kustomization["patches"] = [p for p in kustomization["patches"] if p["path"] != "api-service-patch.yaml"]
    kustomization["patches"].append({"path": "api-service-delete.yaml"})
    (mine / "api-service-patch.yaml").unlink()
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    objects = keyed(kustomize(mine))
    # Everything the cert-manager overlay makes but its APIService (the adapter serving that certificate), and
    # everything the KEDA overlay makes (which has no APIService), and nothing else.
    assert objects == expected()


def keyed(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}


def expected() -> dict[tuple[str, str, str], Object]:
    """Both overlays' objects but the APIService; where both hold one (the base's), cert-manager's (its Deployment
    serves the issued certificate; the others are the same in both)."""
    cert_manager = {key: o for key, o in keyed(kustomize(CERT_MANAGER)).items() if key[0] != "APIService"}
    return {**keyed(kustomize(KEDA)), **cert_manager}
