"""Upgrading from release ecc8de1 (the last one): what an installed user meets, read by today's code from what that
release shipped and answered, captured in tests/upgrade/ (each file says how it was made).

- New adapter, old sidecars: yesterday's sidecar names its pod (and uid) and declares its port `exporter`; today's
  adapter (its new `--exporter-scheme`, default `auto`) must scrape it over plain http, as before, and read it in
  full beside today's sidecar.
- Today's adapter with yesterday's Deployment (args, env; the namespaced overlay's too) and today's exporter with
  yesterday's sidecar and PodResources variables: a replica or sidecar that refuses them never becomes Ready.
- Today's PodResources patch appends to `/spec/volumes`: yesterday's example runtime, copied by users, has no
  `volumes` list, so rebuilding it with today's patches stops (kustomize: "missing path"). Deliberate (an `add`
  of the whole list wiped the runtime's own volumes and the TLS patch's): operations.md's Upgrading must say what
  to write, and what it says must build.
- What changes without a word: runtimes of the policy file outside yesterday's `--namespaces` get no pod-deletion
  cost any more (the start-up warning says so), ModelMeshAutoscalerDiscoveryFailing names such a runtime's
  namespace instead of the cluster, and /debug's `unknown_annotations` left `policy`: the Upgrading section says each.
"""

from __future__ import annotations

import copy
import subprocess
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_aiohttp import AiohttpServer

from autoscaler.cli import build_parser
from autoscaler.model import RuntimeKey
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.runtimes_outside_namespaces import runtimes_outside_namespaces
from autoscaler.serve_args import settings_from_args
from autoscaler.settings import ServeSettings
from autoscaler.sources.base import PodTarget
from autoscaler.sources.kube_objects import RuntimeRecord, build_inventory, parse_pod
from exporter.settings import parse_settings
from tests.manifests.support import EXAMPLES, KUBECTL, Object, container, find, promtool_test_rules
from tests.support.upgrade_sidecars import (
    captured_metrics,
    read_mixed_runtime,
    replayed_sidecar,
    todays_sidecar,
)
from tests.test_docs_upgrading import upgrading

RELEASE = Path(__file__).with_name("upgrade")
OLD: dict[str, Any] = yaml.safe_load((RELEASE / "ecc8de1-manifests.yaml").read_text())
KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
OLD_POD = PodTarget("modelmesh-serving-triton-old", True, "", uid="0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11")
"""The pod yesterday's captured sidecar names in modelmesh_exporter_pod_info (its URL set per test)."""
NEW_POD = {"EXPORTER_POD_NAME": "modelmesh-serving-triton-new", "EXPORTER_POD_NAMESPACE": KEY.namespace,
           "EXPORTER_POD_UID": "5d1e7c3a-1111-4c1d-9e7a-2f0d6b8c9a22"}
SIDECAR = "autoscaler-exporter"
TARGET = "{group: serving.kserve.io, kind: ServingRuntime, name: triton}"


POD_UID = "7c0d9e1f-2222-4c1d-9e7a-2f0d6b8c9a33"


def env_of(entries: list[dict[str, Any]], pod: str) -> dict[str, str]:
    """The variables of a container's `env` entries, the downward API's given pod `pod` (its namespace
    modelmesh-serving, its uid POD_UID)."""
    downward = {"metadata.name": pod, "metadata.namespace": KEY.namespace, "metadata.uid": POD_UID}
    return {entry["name"]: entry["value"] if "value" in entry else downward[entry["valueFrom"]["fieldRef"]["fieldPath"]]
            for entry in entries}


def old_settings(container_key: str, **replaced: str) -> ServeSettings:
    """Today's settings from yesterday's adapter container (`adapter`, or the namespaced overlay's), with flags
    whose value is a file in the pod pointed at one here (`replaced`: flag -> value)."""
    captured = OLD[container_key]
    env = {"POD_NAMESPACE": "modelmesh-autoscaler"}  # its only variable, from the downward API
    assert [entry["name"] for entry in captured["env"]] == list(env)
    args = [arg.replace("$(POD_NAMESPACE)", env["POD_NAMESPACE"]) for arg in captured["args"]]
    args = [f"{arg.split('=')[0]}={replaced[arg.split('=')[0]]}" if arg.split("=")[0] in replaced else arg
            for arg in args]
    return settings_from_args(build_parser().parse_args(args), env)  # argparse exits (2) on what it refuses


def since_ecc8de1() -> str:
    """operations.md's Upgrading from its passage on the changes since ecc8de1 on (lines rewrapped): what a user
    of that release reads before the rollout; empty where there is none."""
    section = upgrading()
    start = section.find("From release ecc8de1")
    return section[start:] if start >= 0 else ""


# ---- the adapter and the sidecars ----

@pytest.fixture
async def old_sidecar(aiohttp_server: AiohttpServer) -> str:
    """Yesterday's sidecar: a server answering its captured /metrics."""
    return await replayed_sidecar(aiohttp_server, captured_metrics("ecc8de1"))


@pytest.fixture
async def new_sidecar(tmp_path: Path) -> AsyncIterator[str]:
    """Today's exporter, a real process naming its pod as the sidecar patch makes it, reading a fake ModelMesh."""
    async with todays_sidecar(tmp_path, NEW_POD) as url:
        yield url


def test_the_new_adapter_scrapes_yesterdays_sidecars_over_plain_http() -> None:
    """Yesterday's Deployment sets no --exporter-scheme: today's default (auto) reads the scheme from the port's
    name, and yesterday's sidecar patch names it `exporter`."""
    settings = old_settings("adapter")
    assert settings.exporter_scheme == "auto"
    labels = {"modelmesh-service": "modelmesh-serving", "name": KEY.deployment}
    pod = parse_pod({"metadata": {"name": OLD_POD.name, "namespace": KEY.namespace, "labels": labels},
                     "spec": {"containers": [{"name": SIDECAR, "ports": OLD["exporter_sidecar_patch_ports"]}]},
                     "status": {"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert pod is not None
    inventory = build_inventory({KEY: RuntimeRecord(KEY, labels)}, [pod], settings.exporter_port,
                                settings.exporter_scheme)
    [target] = inventory[KEY].pods
    assert urllib.parse.urlsplit(target.url or "").scheme == "http", target.url


@pytest.mark.slow
async def test_a_runtime_of_yesterdays_and_todays_sidecars_is_read_in_full(old_sidecar: str,
                                                                          new_sidecar: str) -> None:
    old = PodTarget(OLD_POD.name, True, old_sidecar, uid=OLD_POD.uid)
    new = PodTarget(NEW_POD["EXPORTER_POD_NAME"], True, new_sidecar, uid=NEW_POD["EXPORTER_POD_UID"])
    source, snapshot, now = await read_mixed_runtime(KEY, old, new)
    try:
        assert source.problems(KEY) == (), source.problems(KEY)  # its pod_info names this pod: not other_pod
        read = {pod.name: pod for pod in snapshot.pods}[old.name]
        assert read.requests_per_second == pytest.approx(39.914715796721865)
        assert read.cache_used_ratio == 0.5 and read.models_loaded == 8.0
        values = aggregate(snapshot.pods, RuntimePolicy(target_rps_per_pod=100.0), now)
        assert values.n == 2 and values.request_rate is not None
    finally:
        await source.close()


@pytest.mark.parametrize("container_key", ["adapter", "namespaced_adapter"])
def test_the_new_adapter_starts_with_yesterdays_deployment(container_key: str) -> None:
    settings = old_settings(container_key)
    assert settings.shutdown_delay_s == 5.0 and settings.leader_elect is True


@pytest.mark.parametrize("with_pod_resources", [False, True], ids=["sidecar", "sidecar+pod-resources"])
def test_the_new_exporter_starts_with_yesterdays_patches_variables(with_pod_resources: bool) -> None:
    env = env_of(OLD["exporter_sidecar_patch_env"], "modelmesh-serving-triton-0")
    if with_pod_resources:
        for op in OLD["exporter_pod_resources_patch"]:
            if op["path"].endswith("/env/-"):
                env.update(env_of([op["value"]], "modelmesh-serving-triton-0"))
    settings = parse_settings([], env)  # exits (status 2) on a variable it refuses
    assert settings.load_window_s == 30.0 and settings.pod_name == "modelmesh-serving-triton-0"
    assert (settings.pod_resources_socket is not None) == with_pod_resources


def test_yesterdays_policy_runtime_outside_namespaces_is_told_it_gets_no_deletion_costs(tmp_path: Path) -> None:
    """The namespaced overlay with a policy-file runtime elsewhere: the leader wrote its pods' costs yesterday (or
    was refused, 403); today it writes none, and the start-up warning names the flag and what to add."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"runtimes": [{"namespace": "team-b", "deployment": "modelmesh-serving-triton",
                                                    "target_rps_per_pod": 50}]}))
    settings = old_settings("namespaced_adapter", **{"--config": str(policy)})
    warning = runtimes_outside_namespaces(settings, [RuntimeKey("team-b", "modelmesh-serving-triton")])
    assert warning is not None
    assert "no pod-deletion cost is written on its pods" in warning, warning
    assert "Add team-b to --namespaces" in warning, warning


# ---- the PodResources patch on a runtime of yesterday ----

def build(tmp_path: Path, runtime: Object, patches: list[tuple[str, str]]) -> subprocess.CompletedProcess[str]:
    """`kubectl kustomize` of `runtime` and `patches` ((file name, text), in order), as a user's overlay."""
    tmp_path.mkdir()
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime))
    listed = ""
    for name, text in patches:
        (tmp_path / name).write_text(text)
        listed += f"  - path: {name}\n    target: {TARGET}\n"
    (tmp_path / "kustomization.yaml").write_text(f"resources: [runtime.yaml]\npatches:\n{listed}")
    return subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)


def todays(*names: str) -> list[tuple[str, str]]:
    return [(name, (EXAMPLES / name).read_text()) for name in names]


def test_yesterdays_runtime_with_todays_sidecar_patch_alone_builds_as_before(tmp_path: Path) -> None:
    done = build(tmp_path / "overlay", OLD["servingruntime"], todays("exporter-sidecar-patch.yaml"))
    assert done.returncode == 0, done.stderr


def test_yesterdays_runtime_with_todays_pod_resources_patch_stops_and_the_upgrading_fix_builds(
        tmp_path: Path) -> None:
    """Yesterday these built (the patch added the lists); today's appends, so kustomize stops at /spec/volumes/-.
    The remedy operations.md's Upgrading gives (`volumes: []` in the runtime's spec) must then build, with the
    sidecar mounting the kubelet's socket and the runtime's own volumes kept."""
    patches = todays("exporter-sidecar-patch.yaml", "exporter-pod-resources-patch.yaml")
    old_runtime = OLD["servingruntime"]
    assert "volumes" not in old_runtime["spec"]
    yesterday = build(tmp_path / "yesterday", old_runtime,
                      [patches[0], ("pod-resources.yaml", yaml.safe_dump(OLD["exporter_pod_resources_patch"]))])
    assert yesterday.returncode == 0, yesterday.stderr
    refused = build(tmp_path / "today", old_runtime, patches)
    assert refused.returncode != 0 and "/spec/volumes/-" in refused.stderr, refused.stderr

    section = since_ecc8de1()
    assert "volumes: []" in section and "missing path" in section, "Upgrading does not say what to write"
    fixed = copy.deepcopy(old_runtime)
    fixed["spec"]["volumes"] = []
    done = build(tmp_path / "fixed", fixed, patches)
    assert done.returncode == 0, done.stderr
    runtime = find([doc for doc in yaml.safe_load_all(done.stdout) if doc], "ServingRuntime")
    volumes = {volume["name"]: volume for volume in runtime["spec"]["volumes"]}
    mounts = container(runtime["spec"], SIDECAR)["volumeMounts"]
    assert [volumes[mount["name"]]["hostPath"]["path"] for mount in mounts] == ["/var/lib/kubelet/pod-resources"]


# ---- today's alerts over a rollout from yesterday's adapter ----

def test_the_discovery_alert_moves_from_the_cluster_to_the_refused_namespace(tmp_path: Path) -> None:
    """A policy-file runtime in team-b whose Deployment read is refused, without --namespaces: yesterday's replica
    (until minute 20) turned `namespace="*"` to 0, today's keeps `*` at 1 and writes team-b's 0. The alert firing
    on the cluster resolves, and one naming team-b fires 10 minutes into the new replica."""
    def discovery(pod: str, namespace: str, values: str) -> dict[str, str]:
        return {"series": f'modelmesh_autoscaler_discovery_healthy{{job="modelmesh-autoscaler", '
                          f'namespace="{namespace}", pod="{pod}"}}', "values": values}

    series = [discovery("adapter-old", "*", "0x19 stale"),
              discovery("adapter-new", "*", "_x20 1x39"),
              discovery("adapter-new", "team-b", "_x20 0x39")]
    alert = "ModelMeshAutoscalerDiscoveryFailing"

    def firing(*namespaces: str) -> list[dict[str, Any]]:
        return [{"labels": f'ALERTS{{alertname="{alert}", alertstate="firing", namespace="{namespace}", '
                           f'severity="warning"}}', "value": 1} for namespace in namespaces]

    query = f'ALERTS{{alertname="{alert}", alertstate="firing"}}'
    checks = [{"eval_time": f"{minute}m", "expr": query, "exp_samples": firing(*namespaces)}
              for minute, namespaces in ((15, ("*",)), (27, ()), (35, ("team-b",)))]
    done = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
                               "discovery_upgrade_test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    section = since_ecc8de1()
    assert "ModelMeshAutoscalerDiscoveryFailing" in section and "policy file" in section, (
        "Upgrading does not say the alert moves")


# ---- what Upgrading must say of the changes from yesterday ----

@pytest.mark.parametrize("word", ["--exporter-scheme", "unknown_annotations", "pod-deletion cost", "cache_pressure_cap",
                                  "need_weight_", "--scale-down-tau"])
def test_upgrading_says_what_changed_since_yesterday(word: str) -> None:
    assert word in since_ecc8de1(), f"Upgrading's changes since ecc8de1 do not mention {word}"
