"""The opt-in PodResources patch, applied after the sidecar patch as its comments say: the sidecar's
environment parses with the real exporter parser into the kubelet socket and this pod's name and namespace,
and the socket's directory is mounted from the node."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from exporter.settings import parse_settings
from tests.manifests.support import KUBECTL, MANIFESTS, container

PATCH = "exporter-pod-resources-patch.yaml"


def runtime_with_patch(tmp_path: Path) -> dict[str, object]:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    kustomization = copy / "examples" / "kustomization.yaml"
    document = yaml.safe_load(kustomization.read_text())
    document["patches"].append({"path": PATCH, "target": document["patches"][0]["target"]})
    kustomization.write_text(yaml.safe_dump(document))
    built = subprocess.run([KUBECTL, "kustomize", str(copy / "examples")], capture_output=True, text=True,
                           check=True)
    [runtime] = [o for o in yaml.safe_load_all(built.stdout) if o and o["kind"] == "ServingRuntime"]
    return runtime  # type: ignore[no-any-return]


def test_the_sidecar_reads_its_own_gpus_from_the_kubelet(tmp_path: Path) -> None:
    runtime = runtime_with_patch(tmp_path)
    spec = runtime["spec"]
    assert isinstance(spec, dict)
    sidecar = container(spec, "autoscaler-exporter")
    downward = {"metadata.name": "modelmesh-serving-triton-5d9c-abcde", "metadata.namespace": "modelmesh-serving"}
    env = {e["name"]: e.get("value", downward.get(e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")))
           for e in sidecar["env"]}

    settings = parse_settings([], environ=env)

    assert str(settings.pod_resources_socket) == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert (settings.pod_name, settings.pod_namespace) == tuple(downward.values())
    [mount] = sidecar["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert settings.pod_resources_socket is not None
    assert volume["hostPath"]["path"] == mount["mountPath"] == str(settings.pod_resources_socket.parent)
    assert mount["readOnly"] is True
    assert sidecar["securityContext"]["runAsUser"] == 0  # the kubelet's socket is root's: the cost, stated


def test_the_patch_is_opt_in() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "examples" / "kustomization.yaml").read_text())
    assert PATCH not in [p["path"] for p in kustomization["patches"]]
