"""Setting the image the way the README says (`kustomize edit set image`, which writes `images:` into the
kustomization) reaches every container that runs the project: the adapter and the exporter sidecar."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.manifests.support import KUBECTL, MANIFESTS

IMAGE = "ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler"


def build_with_image(tmp_path: Path, folder: str) -> list[str]:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    kustomization = copy / folder / "kustomization.yaml"
    document = yaml.safe_load(kustomization.read_text())
    document["images"] = [{"name": IMAGE, "newName": "registry.example.com/team/mm-autoscaler", "newTag": "1.2.3"}]
    kustomization.write_text(yaml.safe_dump(document))
    built = subprocess.run([KUBECTL, "kustomize", str(copy / folder)], capture_output=True, text=True, check=True)
    images = []
    for obj in yaml.safe_load_all(built.stdout):
        spec = (obj or {}).get("spec") or {}
        pod = (spec.get("template") or {}).get("spec") or spec
        images += [c["image"] for c in pod.get("containers") or [] if isinstance(c, dict) and "image" in c]
    return images


def test_set_image_reaches_the_adapter(tmp_path: Path) -> None:
    assert build_with_image(tmp_path, "base") == ["registry.example.com/team/mm-autoscaler:1.2.3"]


def test_set_image_reaches_the_exporter_sidecar_in_the_serving_runtime(tmp_path: Path) -> None:
    images = build_with_image(tmp_path, "examples")
    assert "registry.example.com/team/mm-autoscaler:1.2.3" in images
    assert not [image for image in images if image.startswith(IMAGE)]
