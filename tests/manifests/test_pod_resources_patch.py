"""The opt-in PodResources patch, applied after the sidecar patch as its comments say: the sidecar's
environment parses with the real exporter parser into the kubelet socket and this pod's name and namespace (the
sidecar patch's own EXPORTER_POD_NAME and EXPORTER_POD_NAMESPACE: the patch does not set them again), the socket's
directory is mounted from the node, and the real exporter started with that environment reports its pod's GPUs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from exporter.settings import parse_settings
from tests.exporter.test_pod_resources import (
    OUR_POD,
    busy_uuids,
    gpu_success,
    node_answer,
    node_with_gpus,
    served_metrics,
)
from tests.fakes.nvml import default_uuid
from tests.manifests.support import KUBECTL, MANIFESTS, Object, container
from tests.manifests.test_manifests import DOWNWARD_API

PATCH = "exporter-pod-resources-patch.yaml"


def runtime_with_patch(tmp_path: Path) -> Object:
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


def sidecar_environment(sidecar: Object) -> dict[str, str]:
    """The sidecar's variables as the kubelet sets them, the downward API's filled in."""
    return {e["name"]: e["value"] if "value" in e else DOWNWARD_API[e["name"]][1] for e in sidecar["env"]}


def test_the_sidecar_reads_its_own_gpus_from_the_kubelet(tmp_path: Path) -> None:
    runtime = runtime_with_patch(tmp_path)
    spec = runtime["spec"]
    assert isinstance(spec, dict)
    sidecar = container(spec, "autoscaler-exporter")
    env = sidecar_environment(sidecar)

    settings = parse_settings([], environ=env)

    assert str(settings.pod_resources_socket) == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert (settings.pod_name, settings.pod_namespace) == (DOWNWARD_API["EXPORTER_POD_NAME"][1],
                                                           DOWNWARD_API["EXPORTER_POD_NAMESPACE"][1])
    [mount] = sidecar["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert settings.pod_resources_socket is not None
    assert volume["hostPath"]["path"] == mount["mountPath"] == str(settings.pod_resources_socket.parent)
    assert mount["readOnly"] is True
    assert sidecar["securityContext"]["runAsUser"] == 0  # the kubelet's socket is root's: the cost, stated


def test_the_patch_is_opt_in() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "examples" / "kustomization.yaml").read_text())
    assert PATCH not in [p["path"] for p in kustomization["patches"]]


def test_each_pod_fact_is_set_once_across_the_two_patches(tmp_path: Path) -> None:
    """The sidecar patch names the pod; the PodResources patch asks the kubelet about that same pod, not a copy."""
    sidecar = container(runtime_with_patch(tmp_path)["spec"], "autoscaler-exporter")
    fields = [e["valueFrom"]["fieldRef"]["fieldPath"] for e in sidecar["env"] if "valueFrom" in e]
    assert sorted(fields) == sorted(field for field, _ in DOWNWARD_API.values()), fields


@pytest.mark.slow
async def test_the_exporter_started_as_both_patches_set_it_reports_its_pods_gpus(tmp_path: Path) -> None:
    """Both patches applied as their comments and docs/operations.md say, the exporter started with the resulting
    environment (the downward API filled in as the kubelet fills it) beside a kubelet listing this pod: it reports
    the GPUs the kubelet gave this pod, and no other pod's."""
    env = sidecar_environment(container(runtime_with_patch(tmp_path)["spec"], "autoscaler-exporter"))
    assert (env["EXPORTER_POD_NAMESPACE"], env["EXPORTER_POD_NAME"]) == OUR_POD
    mine = (default_uuid(0), default_uuid(2))
    # Every variable of the sidecar; the test's flags win for where it listens, ModelMesh and the kubelet's socket.
    pod_env = {name: value for name, value in env.items() if name.startswith("EXPORTER_")}

    text = await served_metrics(tmp_path, node_answer(mine), node_with_gpus(tmp_path), pod_env=pod_env)

    assert busy_uuids(text) == set(mine)
    assert gpu_success(text) == 1
