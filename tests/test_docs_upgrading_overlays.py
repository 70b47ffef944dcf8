"""operations.md's Upgrading tells the user of an overlay installed in place of the base (manifests/README.md) to
apply that overlay again, its image set by `images:`. It said `kubectl apply -k manifests/base` to everyone: over the
KEDA overlay that brings back the base's APIService and takes KEDA's (every ScaledObject in the cluster loses its
metrics), over exporter-tls it drops the exporters' name and client certificate (every https pod fails), over
namespaced it makes the ClusterRole cluster-wide again, over cert-manager `insecureSkipTLSVerify` comes back."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.support import KUBECTL, MANIFESTS, REPO, find

OPERATIONS = (REPO / "docs" / "operations.md").read_text()


def adapter_paragraph() -> str:
    """Upgrading's "**The adapter.**" paragraph, its code blocks included, up to its first bullet."""
    start = OPERATIONS.index("\n## Upgrading\n")
    start = OPERATIONS.index("**The adapter.**", start)
    return OPERATIONS[start:OPERATIONS.index("\n- ", start)]


def overlays_in_place_of_the_base() -> list[str]:
    """The folders manifests/README.md says are installed in place of the base."""
    readme = (MANIFESTS / "README.md").read_text()
    return re.findall(r"^\| `(examples/[\w-]+)/` \| in place of the base", readme, flags=re.M)


def test_readme_names_overlays_in_place_of_the_base() -> None:
    assert len(overlays_in_place_of_the_base()) >= 4  # else the tests below check nothing


@pytest.mark.parametrize("folder", overlays_in_place_of_the_base())
def test_upgrading_the_adapter_names_each_overlay_installed_in_place_of_the_base(folder: str) -> None:
    assert f"manifests/{folder}" in adapter_paragraph(), (
        f"Upgrading's adapter paragraph does not tell a user of manifests/{folder} to apply it again")


def applied_folders() -> list[str]:
    return re.findall(r"kubectl apply -k (\S+)", adapter_paragraph())


def test_upgrading_the_adapter_does_not_tell_everyone_to_apply_the_base() -> None:
    assert applied_folders(), "Upgrading's adapter paragraph has no `kubectl apply -k` command"
    assert "manifests/base" not in applied_folders() or len(set(applied_folders())) > 1


def images_block() -> list[dict[str, Any]]:
    """The `images:` the paragraph tells the user to write into the kustomization they apply."""
    block = re.search(r"```yaml\n(images:\n.*?)```", adapter_paragraph(), flags=re.S)
    assert block, "Upgrading's adapter paragraph shows no `images:` to write"
    images: list[dict[str, Any]] = yaml.safe_load(block.group(1))["images"]
    return images


@pytest.mark.parametrize("folder", ["base", *overlays_in_place_of_the_base()])
def test_the_images_the_paragraph_shows_reach_the_adapter_of_each_overlay(folder: str, tmp_path: Path) -> None:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    kustomization = copy / folder / "kustomization.yaml"
    document = yaml.safe_load(kustomization.read_text())
    document["images"] = images_block()
    kustomization.write_text(yaml.safe_dump(document))
    built = subprocess.run([KUBECTL, "kustomize", str(copy / folder)], capture_output=True, text=True, check=True)
    deployment = find([o for o in yaml.safe_load_all(built.stdout) if o], "Deployment", "modelmesh-autoscaler")
    wanted = images_block()[0]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith(wanted["newName"]), image
    assert image.endswith(str(wanted.get("digest") or wanted["newTag"])), image
