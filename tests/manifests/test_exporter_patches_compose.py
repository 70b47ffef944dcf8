"""The optional sidecar patches (TLS, PodResources) compose in either order, with the runtime's own volumes.

Before, each JSON patch used `op: add` on `/spec/volumes` and on the sidecar's `volumeMounts`, which replaces a
list already there (RFC 6902, 4.1): the second patch wiped the first one's volume, so GPU attribution was lost
(no kubelet socket) or the TLS Secret was (the exporter exited 2 with no certificate), and a runtime's own
volumes went too. Built with `kubectl kustomize` as a user builds an overlay; each volume the sidecar mounts
must be in the pod, with what each patch put there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.manifests.support import EXAMPLES, EXPORTER_TLS, KUBECTL, Object, container, find

SIDECAR = "autoscaler-exporter"
TARGET = "{group: serving.kserve.io, kind: ServingRuntime, name: triton}"
SIDECAR_PATCH = EXAMPLES / "exporter-sidecar-patch.yaml"
TLS_PATCH = EXPORTER_TLS / "exporter-tls-patch.yaml"
POD_RESOURCES_PATCH = EXAMPLES / "exporter-pod-resources-patch.yaml"
RUNTIME = EXAMPLES / "servingruntime-triton.yaml"
OWN_VOLUME = {"name": "models-cache", "emptyDir": {}}


def built(tmp_path: Path, patches: list[Path], own_volume: bool = False) -> Object:
    """The example runtime (with a volume of its own where asked) and `patches` in that order."""
    tmp_path.mkdir()
    runtime = yaml.safe_load(RUNTIME.read_text())
    if own_volume:
        runtime["spec"]["volumes"] = [*runtime["spec"].get("volumes", []), OWN_VOLUME]
        runtime["spec"]["containers"][0]["volumeMounts"] = [{"name": OWN_VOLUME["name"], "mountPath": "/cache"}]
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime))
    listed = ""
    for index, patch in enumerate(patches):
        (tmp_path / f"{index}-{patch.name}").write_text(patch.read_text())
        listed += f"  - path: {index}-{patch.name}\n    target: {TARGET}\n"
    (tmp_path / "kustomization.yaml").write_text(f"resources: [runtime.yaml]\npatches:\n{listed}")
    output = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)
    assert output.returncode == 0, output.stderr
    return find(list(yaml.safe_load_all(output.stdout)), "ServingRuntime")


def mounted(runtime: Object) -> dict[str, Object]:
    """The sidecar's mount paths and the pod volume each names (a missing volume fails here, as in the pod)."""
    spec = runtime["spec"]
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    mounts = container(spec, SIDECAR).get("volumeMounts", [])
    missing = [mount["name"] for mount in mounts if mount["name"] not in volumes]
    assert not missing, f"the sidecar mounts {missing}, which the pod does not have: {volumes}"
    return {mount["mountPath"]: volumes[mount["name"]] for mount in mounts}


@pytest.mark.parametrize("order", ["tls-first", "pod-resources-first"])
@pytest.mark.parametrize("own_volume", [False, True], ids=["no-own-volume", "own-volume"])
def test_tls_and_pod_resources_patches_keep_each_other_s_volumes(tmp_path: Path, order: str,
                                                                 own_volume: bool) -> None:
    optional = [TLS_PATCH, POD_RESOURCES_PATCH] if order == "tls-first" else [POD_RESOURCES_PATCH, TLS_PATCH]
    runtime = built(tmp_path / "overlay", [SIDECAR_PATCH, *optional], own_volume)
    mounts = mounted(runtime)
    assert mounts["/var/run/exporter-tls"]["secret"]["secretName"] == "modelmesh-exporter-tls", mounts
    assert mounts["/var/lib/kubelet/pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources", mounts
    names = [volume["name"] for volume in runtime["spec"]["volumes"]]
    assert len(names) == len(set(names)), names
    if own_volume:
        assert OWN_VOLUME in runtime["spec"]["volumes"], runtime["spec"]["volumes"]


@pytest.mark.parametrize("patch", [TLS_PATCH, POD_RESOURCES_PATCH], ids=["tls", "pod-resources"])
def test_one_optional_patch_keeps_the_runtime_s_own_volume(tmp_path: Path, patch: Path) -> None:
    runtime = built(tmp_path / "overlay", [SIDECAR_PATCH, patch], own_volume=True)
    assert OWN_VOLUME in runtime["spec"]["volumes"], runtime["spec"]["volumes"]
    assert len(mounted(runtime)) == 1


def test_a_runtime_without_a_volumes_list_is_refused_not_emptied(tmp_path: Path) -> None:
    """What a user's runtime with no `volumes:` meets: kustomize stops, naming the path (no volume silently lost)."""
    runtime = yaml.safe_load(RUNTIME.read_text())
    del runtime["spec"]["volumes"]
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime))
    (tmp_path / "patch.yaml").write_text(TLS_PATCH.read_text())
    (tmp_path / "sidecar.yaml").write_text(SIDECAR_PATCH.read_text())
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [runtime.yaml]\npatches:\n  - path: sidecar.yaml\n    target: {TARGET}\n"
        f"  - path: patch.yaml\n    target: {TARGET}\n")
    output = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)
    assert output.returncode != 0 and "/spec/volumes/-" in output.stderr, output
