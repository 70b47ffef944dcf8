"""The Kubernetes manifests: they build offline, are valid objects, and agree with the code they run.

Drift is the enemy here: a renamed flag, metric, port or selector key breaks a cluster install without
breaking any unit test. So the manifests are read back and checked against the real argparse parsers, the
served metric names, the selector parser, the policy loader and the image's user.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import io
import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from autoscaler.api.selector import deployment_from_selector
from autoscaler.cli import build_parser as autoscaler_parser
from autoscaler.names import API_GROUP, API_VERSION, SERVINGRUNTIME_DEPLOYMENT_PREFIX, ServedMetric
from autoscaler.policies.config import parse_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.serve_args import settings_from_args
from autoscaler.settings import ServeSettings
from exporter.settings import ExporterSettings, parse_settings
from tests.manifests.support import (
    BASE,
    CERT_MANAGER,
    EXAMPLES,
    EXPORTER_TLS,
    KEDA,
    KEDA_SCALED_OBJECT,
    KUSTOMIZATIONS,
    REPO,
    Object,
    commented_yaml,
    container,
    find,
    kustomize,
    load_yaml,
)

NAMESPACE = "modelmesh-autoscaler"
ADAPTER = "adapter"
SIDECAR = "autoscaler-exporter"
# Kubernetes minor versions the objects must be valid for (the oldest supported and a recent one). 1.30 is the
# first with admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (base/validating-admission-policy.yaml).
KUBERNETES_VERSIONS = ("1.30.0", "1.33.0")
# What the NVIDIA container runtime reads from a container's environment; the only non-EXPORTER_ variables.
NVIDIA_RUNTIME_ENV = frozenset({"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"})


def adapter_deployment(directory: Path = BASE) -> Object:
    return find(kustomize(directory), "Deployment", "modelmesh-autoscaler")


def runtime_objects() -> tuple[Object, Object]:
    """The example ServingRuntime (sidecar patched in) and its HPA."""
    objects = kustomize(EXAMPLES)
    return find(objects, "ServingRuntime"), find(objects, "HorizontalPodAutoscaler")


def parse_or_fail(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse like the container will; an unknown or malformed flag fails the test with argparse's message."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"{parser.prog} rejects {argv}:\n{errors.getvalue()}")


def expand_env_references(args: list[str], env: list[Object], namespace: str) -> list[str]:
    """Replace `$(VAR)` as the kubelet does (a downward-API `metadata.namespace` is the pod's namespace, which
    the flags check as a namespace name); every reference must name a variable the container defines."""

    def value(item: Object) -> str:
        if "value" in item:
            return str(item["value"])
        if item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            return namespace
        return f"<{item['name']}>"

    defined = {item["name"]: value(item) for item in env}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in defined, f"argument refers to $({name}), which the container does not define"
        return defined[name]

    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", replace, arg) for arg in args]


def serve_settings(deployment: Object) -> ServeSettings:
    adapter = container(deployment["spec"]["template"]["spec"], ADAPTER)
    assert adapter["command"] == ["modelmesh-autoscaler"]
    argv = expand_env_references(adapter["args"], adapter.get("env", []), deployment["metadata"]["namespace"])
    args = parse_or_fail(autoscaler_parser(), argv)
    assert args.command == "serve"
    return settings_from_args(args)


def mount_paths(pod_spec: Object, container_spec: Object) -> dict[str, Object]:
    """Mount path -> volume, for one container."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    return {m["mountPath"]: volumes[m["name"]] for m in container_spec.get("volumeMounts", [])}


def mounted_from(path: Path, mounts: dict[str, Object]) -> Object:
    """The volume a file path lies in; fails the test when no mount holds it."""
    for mount_path, volume in mounts.items():
        if path.is_relative_to(mount_path):
            return volume
    pytest.fail(f"{path} is on no mounted volume (mounts: {sorted(mounts)})")


class _EnvironReads(dict[str, str]):
    """A stand-in for os.environ that records which variables are looked up."""

    def __init__(self, base: dict[str, str]) -> None:
        super().__init__(base)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)


def exporter_env_twins(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The EXPORTER_* variables the exporter looks up when it reads its settings: its flags' twins."""
    environ = _EnvironReads({k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")})
    with monkeypatch.context() as patch:
        patch.setattr(os, "environ", environ)
        parse_settings([])
    return {name for name in environ.read if name.startswith("EXPORTER_")}


DOWNWARD_API: dict[str, tuple[str, str]] = {
    "EXPORTER_POD_NAME": ("metadata.name", "modelmesh-serving-triton-5d9c-abcde"),
    "EXPORTER_POD_NAMESPACE": ("metadata.namespace", "modelmesh-serving"),
    "EXPORTER_POD_UID": ("metadata.uid", "0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11"),
}
"""The sidecar's variables set from the downward API: the field each is set from, and a value the kubelet gives."""


def exporter_settings(sidecar: Object, monkeypatch: pytest.MonkeyPatch) -> ExporterSettings:
    """The settings the sidecar starts with: its environment and its args, read by the exporter itself."""
    assert sidecar["command"] == ["modelmesh-exporter"]
    for name in [n for n in os.environ if n.startswith("EXPORTER_")]:
        monkeypatch.delenv(name)
    for item in sidecar.get("env", []):
        monkeypatch.setenv(item["name"], item["value"] if "value" in item else DOWNWARD_API[item["name"]][1])
    argv = sidecar.get("args", [])
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parse_settings(argv)
    except SystemExit:
        pytest.fail(f"modelmesh-exporter rejects the sidecar's args {argv} or environment:\n{errors.getvalue()}")


# ---- every kustomization ----


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(REPO)))
def test_kustomization_builds_offline_into_named_objects(directory: Path) -> None:
    objects = kustomize(directory)
    assert objects
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind"), obj
        assert obj.get("metadata", {}).get("name"), obj


@pytest.mark.parametrize("directory", (*KUSTOMIZATIONS, KEDA / "component"), ids=lambda d: str(d.relative_to(REPO)))
def test_each_file_holds_one_object_and_is_listed(directory: Path) -> None:
    kustomization = load_yaml(directory / "kustomization.yaml")
    listed = {r for r in kustomization.get("resources", []) if not r.startswith("..")}
    patches = {p["path"] for p in kustomization.get("patches", [])}
    on_disk = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    objects = {name for name in on_disk if isinstance(load_yaml(directory / name), dict)
               and "kind" in load_yaml(directory / name)}
    applied_alone = {KEDA_SCALED_OBJECT.name} if directory == KEDA else set()  # once the RuntimeScale has replicas
    assert objects - patches - applied_alone == listed, "every object file in the folder is a resource, and only those"
    assert patches <= on_disk
    for name in listed:
        text = (directory / name).read_text()
        assert len([d for d in text.split("\n---") if d.strip()]) == 1, f"{name}: one object per file"


@pytest.fixture(scope="module", autouse=True)
def schemas_read_once() -> Iterator[None]:
    """kubernetes_validate reads its schema and the version's whole `_definitions.json` from disk again for every
    object it validates (70% of these tests' time): the same files, read once for this module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes_validate.utils, "schema_contents",
                      functools.cache(kubernetes_validate.utils.schema_contents))
        yield


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("directory", (BASE, EXAMPLES, CERT_MANAGER, KEDA, EXPORTER_TLS),
                         ids=lambda d: str(d.relative_to(REPO)))
def test_objects_are_valid_for_kubernetes(directory: Path, version: str) -> None:
    checked = 0
    for obj in kustomize(directory):
        if obj["kind"] == "ServingRuntime":
            # A CRD, but its containers are core Containers: validate them inside a Pod.
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"},
                   "spec": {"containers": obj["spec"]["containers"]}}
            kubernetes_validate.validate(pod, version, strict=True)
            checked += 1
            continue
        if obj["apiVersion"].startswith("autoscaler.modelmesh.io/"):
            validate_runtime_scale(obj)  # the project's own CRD: its schema is in the base
            checked += 1
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
            checked += 1
        except kubernetes_validate.SchemaNotFoundError:
            foreign = {"monitoring.coreos.com", "cert-manager.io", "keda.sh"}
            assert obj["apiVersion"].split("/")[0] in foreign, obj["kind"]
    assert checked


def validate_runtime_scale(obj: Object) -> None:
    """A RuntimeScale against the CRD's structural schema, unknown fields refused (as the API server prunes
    them, a misspelt field would silently vanish)."""
    crd = find(kustomize(BASE), "CustomResourceDefinition", "runtimescales.autoscaler.modelmesh.io")
    [version] = [v for v in crd["spec"]["versions"] if obj["apiVersion"].endswith("/" + v["name"])]

    def closed(schema: Object) -> Object:
        if schema.get("type") == "object" and "properties" in schema:
            return {**schema, "additionalProperties": False,
                    "properties": {k: closed(v) for k, v in schema["properties"].items()}}
        return schema

    jsonschema.validate(obj, closed(version["schema"]["openAPIV3Schema"]))


# ---- the base ----


def test_base_objects_are_in_the_adapter_namespace_except_the_auth_reader_and_runtime_writes() -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "APIService", "CustomResourceDefinition",
                      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for obj in kustomize(BASE):
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in cluster_scoped:
            assert namespace is None, obj["metadata"]["name"]
        elif obj["kind"] == "RoleBinding" and obj["roleRef"]["name"] == "extension-apiserver-authentication-reader":
            assert namespace == "kube-system"
        elif obj["metadata"]["name"] == "modelmesh-autoscaler-runtimes":
            assert namespace == "modelmesh-serving"  # writes only where the runtimes are
        else:
            assert namespace == NAMESPACE, f"{obj['kind']} {obj['metadata']['name']}"
    assert find(kustomize(BASE), "Namespace")["metadata"]["name"] == NAMESPACE


def test_api_service_registers_the_served_group_through_the_service() -> None:
    objects = kustomize(BASE)
    api_service = find(objects, "APIService")
    spec = api_service["spec"]
    assert api_service["metadata"]["name"] == f"{API_VERSION}.{API_GROUP}"
    assert (spec["group"], spec["version"]) == (API_GROUP, API_VERSION)
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (100, 100)
    assert spec["insecureSkipTLSVerify"] is True and "caBundle" not in spec

    service = find(objects, "Service", spec["service"]["name"])
    assert service["metadata"]["namespace"] == spec["service"]["namespace"]
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == spec["service"]["port"]]
    assert port["port"] == 443

    deployment = find(objects, "Deployment")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    adapter = container(pod["spec"], ADAPTER)
    (container_port,) = [p for p in adapter["ports"] if p["name"] == port["targetPort"]]
    assert container_port["containerPort"] == serve_settings(deployment).listen_port == 6443


def test_the_hpa_controller_may_read_external_metrics() -> None:
    objects = kustomize(BASE)
    binding = find(objects, "ClusterRoleBinding", "modelmesh-autoscaler:hpa-external-metrics")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler",
                                    "namespace": "kube-system"}]
    role = find(objects, "ClusterRole", binding["roleRef"]["name"])
    [rule] = [r for r in role["rules"] if r["apiGroups"] == ["external.metrics.k8s.io"]]
    assert set(rule["resources"]) == {m.value for m in ServedMetric} and set(rule["verbs"]) == {"get", "list"}


def test_the_runtime_scale_crd_serves_the_scale_subresource_the_hpa_needs() -> None:
    crd = find(kustomize(BASE), "CustomResourceDefinition", "runtimescales.autoscaler.modelmesh.io")
    [version] = crd["spec"]["versions"]
    assert crd["spec"]["scope"] == "Namespaced" and version["name"] == "v1alpha1"
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                  "labelSelectorPath": ".status.selector"},
    }
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["selector"]["type"] == "string"  # the HPA reads a selector string, not a LabelSelector


def test_the_adapter_runs_the_bridge() -> None:
    settings = serve_settings(adapter_deployment())
    assert settings.bridge is True


def test_adapter_command_line_parses_with_the_real_cli() -> None:
    deployment = adapter_deployment()
    settings = serve_settings(deployment)
    pod_spec = deployment["spec"]["template"]["spec"]
    mounts = mount_paths(pod_spec, container(pod_spec, ADAPTER))

    assert (settings.listen_host, settings.listen_port) == ("", 6443)  # every address, IPv4 and IPv6
    assert settings.leader_elect is True and settings.deletion_cost
    assert settings.leader_elect_namespace == deployment["metadata"]["namespace"] == "modelmesh-autoscaler"
    assert not settings.insecure_dev and settings.targets is None
    assert settings.config is not None
    assert mounted_from(settings.config, mounts)["configMap"]["name"] == "modelmesh-autoscaler-policy"


def test_cert_manager_overlay_serves_its_certificate_and_verifies_it() -> None:
    objects = kustomize(CERT_MANAGER)
    deployment = find(objects, "Deployment")
    settings = serve_settings(deployment)
    pod_spec = deployment["spec"]["template"]["spec"]
    mounts = mount_paths(pod_spec, container(pod_spec, ADAPTER))
    assert settings.tls_cert_file is not None and settings.tls_private_key_file is not None
    secrets = {mounted_from(path, mounts)["secret"]["secretName"]
               for path in (settings.tls_cert_file, settings.tls_private_key_file)}
    serving = find(objects, "Certificate", "modelmesh-autoscaler-serving")
    assert secrets == {serving["spec"]["secretName"]}
    service = find(objects, "Service")
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in serving["spec"]["dnsNames"]

    api_service = find(objects, "APIService")
    assert "insecureSkipTLSVerify" not in api_service["spec"]
    ca_namespace, ca_name = api_service["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    ca = find(objects, "Certificate", ca_name)
    assert ca["metadata"]["namespace"] == ca_namespace and ca["spec"]["isCA"] is True
    issuer = find(objects, "Issuer", serving["spec"]["issuerRef"]["name"])
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]


def test_adapter_probes_use_health_paths_open_without_authentication() -> None:
    adapter = container(adapter_deployment()["spec"]["template"]["spec"], ADAPTER)
    open_paths = ServeSettings().authorization_always_allow_paths
    port_names = {p["name"] for p in adapter["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        http_get = adapter[probe]["httpGet"]
        assert (http_get["path"], http_get["scheme"]) == (path, "HTTPS")
        assert http_get["path"] in open_paths and http_get["port"] in port_names


def test_adapter_runs_unprivileged_with_a_read_only_root_and_a_writable_tmp() -> None:
    deployment = adapter_deployment()
    pod_spec = deployment["spec"]["template"]["spec"]
    adapter = container(pod_spec, ADAPTER)
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert adapter["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
    }
    assert adapter["resources"]["requests"] and adapter["resources"]["limits"]
    # The generated self-signed certificate goes to tempfile's directory, /tmp.
    tmp = mount_paths(pod_spec, adapter).get("/tmp")
    assert tmp is not None and "emptyDir" in tmp
    # The image's numeric user is the one the manifests run as.
    dockerfile = (REPO / "Dockerfile").read_text()
    user = re.findall(r"^USER\s+(\d+)(?::(\d+))?\s*$", dockerfile, re.MULTILINE)
    assert user[-1] == (str(pod_spec["securityContext"]["runAsUser"]), str(pod_spec["securityContext"]["runAsGroup"]))
    assert adapter["image"] == "ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:0.1.0"


def cores(quantity: str) -> float:
    """A CPU quantity as Kubernetes writes it ("2", "1500m", "0.5") in cores."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize("directory", (BASE, CERT_MANAGER, KEDA), ids=lambda d: str(d.relative_to(REPO)))
def test_the_cpu_limit_leaves_a_core_to_the_refresh_process_and_each_serving_worker(directory: Path) -> None:
    """The refresh process and the serving workers are separate processes of one container: under a CFS quota
    of one core, a refresh (seconds of CPU at 5,000 runtimes) and the serving worker together use up the quota
    early in each 100 ms period and the worker waits out the rest, however idle the node. `bench_fleet.py
    --cpu-limit 1` showed it throttled in 3-8% of its periods at 1,000 runtimes; with 2 cores, never."""
    deployment = adapter_deployment(directory)
    adapter = container(deployment["spec"]["template"]["spec"], ADAPTER)
    processes = 1 + max(1, serve_settings(deployment).workers)  # `--workers 0`: one process, still one event loop
    limit = adapter["resources"].get("limits", {}).get("cpu")
    assert limit is None or cores(limit) >= processes, (
        f"{directory.name}: limits.cpu {limit} for {processes} processes (refresh + workers)")


def test_image_commands_are_the_package_scripts() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    sidecar = container(runtime_objects()[0]["spec"], SIDECAR)
    adapter = container(adapter_deployment()["spec"]["template"]["spec"], ADAPTER)
    assert {adapter["command"][0], sidecar["command"][0]} <= set(scripts)
    assert sidecar["image"] == adapter["image"]


def test_image_build_copies_everything_pip_install_needs() -> None:
    # The Dockerfile copies sources one by one (no .dockerignore needed): a new package must be added there.
    dockerfile = (REPO / "Dockerfile").read_text()
    build_stage = dockerfile.split("\nFROM ")[1]
    copied = {src.rstrip("/") for line in re.findall(r"^COPY\s+(?!--from)(.+)$", build_stage, re.MULTILINE)
              for src in line.split()[:-1]}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert {"pyproject.toml", project["project"]["readme"]} <= copied
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()
                and any(fnmatch.fnmatch(p.name, pattern) for pattern in patterns)}
    assert packages and packages <= copied, f"packages not copied into the image: {sorted(packages - copied)}"
    assert re.search(r'^RUN pip install .*\s"?\.(\[[\w,-]+\])?"?\s*$', build_stage, re.MULTILINE)
    extras = re.findall(r'^RUN pip install .*\s"?\.\[([\w,-]+)\]', build_stage, re.MULTILINE)
    assert set(",".join(extras).split(",") if extras else []) <= set(project["project"]["optional-dependencies"])


def test_two_replicas_survive_a_voluntary_disruption() -> None:
    objects = kustomize(BASE)
    deployment = find(objects, "Deployment")
    budget = find(objects, "PodDisruptionBudget")
    assert deployment["spec"]["replicas"] == 2
    assert 1 <= budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    # Two crash-looping adapter pods must not block node drains (the default, IfHealthyBudget, would).
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_policy_config_map_is_the_built_in_defaults_and_loads() -> None:
    config_map = find(kustomize(BASE), "ConfigMap", "modelmesh-autoscaler-policy")
    (key,) = config_map["data"]
    settings = serve_settings(adapter_deployment())
    assert settings.config is not None and settings.config.name == key
    book = parse_policy_book(yaml.safe_load(config_map["data"][key]), key)
    assert book.defaults == RuntimePolicy()
    assert book.runtimes == {}
    # The commented example entry is a valid policy too.
    source = BASE / "config-map-policy.yaml"
    example = commented_yaml(source, "for example:")
    parsed = parse_policy_book(example, str(source))
    assert [key.deployment for key in parsed.runtimes] == ["modelmesh-serving-triton"]


# ---- the example runtime and its HPA ----


def label_selector(match_labels: dict[str, str]) -> str:
    """The `labelSelector` the HPA sends for a metric selector (what the adapter parses)."""
    return ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))


def test_hpa_adopts_the_served_recommendation_for_its_own_runtime() -> None:
    runtime, hpa = runtime_objects()
    spec = hpa["spec"]
    target = spec["scaleTargetRef"]
    assert (hpa["apiVersion"], target["apiVersion"], target["kind"]) == (
        "autoscaling/v2", "autoscaler.modelmesh.io/v1alpha1", "RuntimeScale")
    runtime_scale = find(kustomize(EXAMPLES), "RuntimeScale", target["name"])
    assert runtime_scale["spec"] == {"servingRuntime": runtime["metadata"]["name"]}  # replicas: adopted
    deployment = SERVINGRUNTIME_DEPLOYMENT_PREFIX + runtime["metadata"]["name"]
    assert hpa["metadata"]["name"] != deployment, "modelmesh-serving owns an HPA named like the Deployment"
    assert hpa["metadata"]["namespace"] == runtime["metadata"]["namespace"] == runtime_scale["metadata"]["namespace"]

    (metric,) = spec["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["name"] == ServedMetric.DESIRED_REPLICAS
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}
    selector = label_selector(metric["external"]["metric"]["selector"]["matchLabels"])
    assert deployment_from_selector(selector) == deployment


def test_hpa_alternative_in_comments_is_a_valid_gpu_busy_metric() -> None:
    _, hpa = runtime_objects()
    (alternative,) = commented_yaml(EXAMPLES / "hpa-triton.yaml", "Alternative:")
    assert alternative["external"]["metric"]["name"] == ServedMetric.GPU_BUSY
    assert alternative["external"]["target"] == {"type": "Value", "value": "800m"}
    selector = label_selector(alternative["external"]["metric"]["selector"]["matchLabels"])
    runtime_scale = hpa["spec"]["scaleTargetRef"]["name"]
    assert deployment_from_selector(selector) == SERVINGRUNTIME_DEPLOYMENT_PREFIX + runtime_scale
    # It is a valid metric spec: swap it in and validate the HPA.
    hpa["spec"]["metrics"] = [alternative]
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(hpa, version, strict=True)


def test_hpa_leaves_slow_scale_down_to_the_adapter_and_scales_up_at_default_speed() -> None:
    behavior = runtime_objects()[1]["spec"]["behavior"]
    # One slow-down rail (the adapter's scale_down_tau_s), chosen with the simulator: no second one here.
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 0, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    }
    # The HPA's documented default scale-up behaviour.
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 0, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15},
                     {"type": "Pods", "value": 4, "periodSeconds": 15}],
    }


def shown_within(shown: Any, shipped: Any) -> bool:
    """Whether every field a document shows has the shipped value (it may leave fields out)."""
    if isinstance(shown, dict):
        return isinstance(shipped, dict) and all(k in shipped and shown_within(v, shipped[k]) for k, v in shown.items())
    return bool(shown == shipped)


def test_the_operations_guide_shows_the_shipped_runtime_scale_and_hpa() -> None:
    """A reader copies the guide's YAML: it must say what the examples ship (the scale-down rail above all)."""
    guide = (REPO / "docs" / "operations.md").read_text()
    blocks = [yaml.safe_load_all(b) for b in re.findall(r"```yaml\n(.*?)```", guide, flags=re.S)]
    shown = {d["kind"]: d for block in blocks for d in block if isinstance(d, dict) and "kind" in d}
    objects = kustomize(EXAMPLES)
    for kind in ("RuntimeScale", "HorizontalPodAutoscaler"):
        shipped = find(objects, kind)
        assert shown_within(shown[kind]["spec"], shipped["spec"]), (
            f"docs/operations.md's {kind} differs from the example's:\n{shown[kind]['spec']}\n{shipped['spec']}")


def test_runtime_has_no_autoscaler_class_so_its_spec_replicas_rule() -> None:
    runtime, _ = runtime_objects()
    # Class hpa makes modelmesh-serving ignore spec.replicas and add its own HPA; other classes are rejected by
    # its webhook. Only no class lets the bridge's spec.replicas reach the Deployment.
    assert "serving.kserve.io/autoscalerClass" not in runtime["metadata"].get("annotations", {})
    assert "replicas" not in runtime["spec"]  # the bridge owns it: GitOps must not set it
    assert runtime["spec"]["multiModel"] is True


def test_runtime_takes_predictors_that_name_their_protocol() -> None:
    # modelmesh-serving labels a runtime `pv:<protocol>` only from spec.protocolVersions (plus `pv:v2` for
    # grpc-v2 with the REST proxy: controllers/modelmesh/model_type_labels.go), and places a predictor that
    # names its protocolVersion only on a runtime with that label. The built-in triton-2.x lists grpc-v2.
    runtime, _ = runtime_objects()
    assert "grpc-v2" in runtime["spec"].get("protocolVersions", [])

# ---- the exporter sidecar ----


def test_sidecar_environment_is_exporter_flags_or_nvidia_runtime_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    sidecar = container(runtime_objects()[0]["spec"], SIDECAR)
    twins = exporter_env_twins(monkeypatch)
    for item in sidecar["env"]:
        name = item["name"]
        if "valueFrom" in item:  # only this pod's identity, as the kubelet fills it in
            assert item["valueFrom"] == {"fieldRef": {"fieldPath": DOWNWARD_API[name][0]}}, item
        if name in NVIDIA_RUNTIME_ENV:
            continue
        assert name.startswith("EXPORTER_"), f"{name}: the sidecar is configured through EXPORTER_* only"
        assert name in twins, f"{name} is no exporter flag's twin (known: {sorted(twins)})"

    settings = exporter_settings(sidecar, monkeypatch)
    assert settings.modelmesh_insecure, "ModelMesh serves a self-signed certificate"
    assert settings.modelmesh_url == "https://127.0.0.1:2112/metrics"
    assert settings.gpu_enabled and settings.gpu_uuids == ()
    (port,) = sidecar["ports"]
    assert settings.listen_port == port["containerPort"] == serve_settings(adapter_deployment()).exporter_port
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}


def test_sidecar_patch_is_what_the_example_runtime_runs() -> None:
    (operation,) = load_yaml(EXAMPLES / "exporter-sidecar-patch.yaml")
    assert (operation["op"], operation["path"]) == ("add", "/spec/containers/-")
    assert container(runtime_objects()[0]["spec"], SIDECAR) == operation["value"]


def test_sidecar_obeys_modelmesh_rules_for_extra_containers() -> None:
    # From modelmesh-serving's ServingRuntime validation: reserved names, ports and managed fields.
    sidecar = container(runtime_objects()[0]["spec"], SIDECAR)
    assert sidecar["name"] not in {"mm", "rest-proxy", "puller"} and not sidecar["name"].startswith("mm-")
    assert "readinessProbe" not in sidecar and "lifecycle" not in sidecar
    for port in sidecar["ports"]:
        assert port["name"] not in {"grpc", "http", "prometheus"} and not port["name"].startswith("mm-")
        assert port["containerPort"] not in {8080, 8085, 8089, 8090}
        assert not 11881 <= port["containerPort"] < 11900
    assert sidecar["securityContext"]["runAsNonRoot"] is True
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_rollout_starts_the_new_replica_before_it_stops_an_old_one() -> None:
    # maxUnavailable 0: an old replica goes only once a new one is Ready (has refreshed); maxSurge 1 lets the
    # rollout proceed at all (with both 0 the Deployment is rejected). The PDB keeps a replica through drains.
    strategy = adapter_deployment()["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    assert strategy["rollingUpdate"]["maxSurge"] >= 1


def test_a_stopping_replica_is_done_before_the_kubelet_kills_it() -> None:
    # After SIGTERM: the leader's writes in flight (one client timeout, autoscaler/actuation/write_fence.py), the
    # Lease release (a read and a write, each within the client timeout), --shutdown-delay of
    # serving on, then the serving workers' stop (one deadline for all of them, autoscaler/worker_pool.py). A pod
    # still running at terminationGracePeriodSeconds is SIGKILLed mid-way (and its stop logged as a failure).
    # The same sum as the adapter's start-up line tells an operator who changes the delay (autoscaler/stop_budget.py).
    from autoscaler.stop_budget import stop_budget_s

    deployment = adapter_deployment()
    settings = serve_settings(deployment)
    budget_s = stop_budget_s(settings)
    grace_s = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    assert settings.shutdown_delay_s > 0, "without it the endpoints still route to a closed port for a moment"
    assert budget_s + 5 <= grace_s, (budget_s, grace_s)
    # The comment beside terminationGracePeriodSeconds quotes what the adapter logs for the base's delay.
    assert f"terminationGracePeriodSeconds must be above {budget_s:g} s" in (BASE / "deployment.yaml").read_text()
