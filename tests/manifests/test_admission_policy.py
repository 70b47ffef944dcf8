"""The ValidatingAdmissionPolicy's CEL, compiled and evaluated with a CEL implementation (cel-python) against
the writes it must allow and refuse, the way the API server evaluates it: `object` is the object after the
patch, `oldObject` before it, `request` the admission request; the policy applies when every matchCondition is
true and denies when any validation is false."""

from __future__ import annotations

import copy
import functools
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from tests.fakes.kube.patches import merge_patch
from tests.manifests.support import BASE, EXAMPLES, find, kustomize

ADAPTER = "system:serviceaccount:modelmesh-autoscaler:modelmesh-autoscaler"
COST = "controller.kubernetes.io/pod-deletion-cost"
# The `spec` properties of KServe's ServingRuntime CRD (v1alpha1): every field but `replicas` must be frozen for
# the adapter. The policy compares the spec's keys, naming none; these are the fields of both schemas a cluster may
# run, each checked on its own, and a field neither has is checked below.
# As modelmesh-serving installs it (config/crd/bases/serving.kserve.io_servingruntimes.yaml, copied from v0.12):
SERVING_RUNTIME_SPEC_FIELDS_V0_12 = (
    "affinity", "annotations", "builtInAdapter", "containers", "disabled", "grpcDataEndpoint", "grpcEndpoint",
    "httpDataEndpoint", "imagePullSecrets", "labels", "multiModel", "nodeSelector", "protocolVersions", "replicas",
    "storageHelper", "supportedModelFormats", "tolerations", "volumes",
)
# As KServe itself installs it, newest (config/crd/full/serving.kserve.io_servingruntimes.yaml): v0.14 added
# hostIPC and workerSpec, v0.20 schedulerName, KServe's main branch after v0.20 resourceClaims (the inlined
# ServingRuntimePodSpec of pkg/apis/serving/v1alpha1/servingruntime_types.go).
SERVING_RUNTIME_SPEC_FIELDS_NEWEST = (
    *SERVING_RUNTIME_SPEC_FIELDS_V0_12, "hostIPC", "resourceClaims", "schedulerName", "workerSpec",
)

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "modelmesh-serving-triton-5d9c8b7f6-abcde", "namespace": "modelmesh-serving",
                 "labels": {"modelmesh-service": "modelmesh-serving", "name": "modelmesh-serving-triton"},
                 "annotations": {"prometheus.io/scrape": "true"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "1"}]},
    "spec": {"containers": [{"name": "mm", "image": "kserve/modelmesh:v0.12.0"}], "nodeName": "gpu-1"},
}


def policy() -> dict[str, Any]:
    return find(kustomize(BASE), "ValidatingAdmissionPolicy")


def serving_runtime() -> dict[str, Any]:
    return find(kustomize(EXAMPLES), "ServingRuntime")


def runtime_scale() -> dict[str, Any]:
    """The example RuntimeScale as created: no replicas yet (the adapter adopts its runtime's)."""
    scale = find(kustomize(EXAMPLES), "RuntimeScale")
    assert "replicas" not in scale["spec"]
    return scale


@functools.cache
def program(expression: str) -> celpy.Runner:
    """Compiled once per expression (each compile parses it anew, tens of ms): a runner keeps no activation of one
    evaluation for the next."""
    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def admitted(old: dict[str, Any] | None, new: dict[str, Any] | None, *, user: str = ADAPTER,
             operation: str = "UPDATE", subresource: str = "") -> bool:
    """What the API server decides for this write under the shipped policy; `subresource` (`status`) for a write
    through it, which a rule matches only where it names `RESOURCE/SUBRESOURCE`."""
    spec = policy()["spec"]
    target = new or old
    assert target is not None
    resource = {"Pod": "pods", "ServingRuntime": "servingruntimes", "RuntimeScale": "runtimescales"}[target["kind"]]
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": operation, "userInfo": {"username": user},
                                      "resource": {"group": "", "version": "v1", "resource": resource},
                                      "subResource": subresource}),
    }
    rules = spec["matchConstraints"]["resourceRules"]
    matched = f"{resource}/{subresource}" if subresource else resource
    if not any(matched in rule["resources"] and operation in rule["operations"] for rule in rules):
        return True  # a resource or operation the policy does not match
    if not all(program(c["expression"]).evaluate(activation) for c in spec["matchConditions"]):
        return True  # not the adapter: the policy does not apply
    for validation in spec["validations"]:
        try:
            if not program(validation["expression"]).evaluate(activation):
                return False
        except CELEvalError:
            return False  # an evaluation error fails closed (failurePolicy: Fail)
    return True


def patched(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = merge_patch(copy.deepcopy(obj), patch)
    return result


def test_every_expression_compiles() -> None:
    spec = policy()["spec"]
    for entry in [*spec["matchConditions"], *spec["validations"]]:
        program(entry["expression"])
    assert spec["failurePolicy"] == "Fail"
    binding = find(kustomize(BASE), "ValidatingAdmissionPolicyBinding")
    assert (binding["spec"]["policyName"], binding["spec"]["validationActions"]) == (
        policy()["metadata"]["name"], ["Deny"])


@pytest.mark.parametrize(("case", "patch"), [
    ("first cost", {"metadata": {"annotations": {COST: "300"}}}),
    ("cost changed", {"metadata": {"annotations": {COST: "-100"}}}),
])
def test_the_adapter_may_write_the_deletion_cost(case: str, patch: dict[str, Any]) -> None:
    old = patched(POD, {"metadata": {"annotations": {COST: "900"}}}) if case == "cost changed" else POD
    assert admitted(old, patched(old, patch))


@pytest.mark.parametrize(("case", "patch"), [
    ("another annotation", {"metadata": {"annotations": {"example.com/x": "1"}}}),
    ("an annotation changed", {"metadata": {"annotations": {"prometheus.io/scrape": "false"}}}),
    ("an annotation removed", {"metadata": {"annotations": {"prometheus.io/scrape": None}}}),
    ("a label", {"metadata": {"labels": {"name": "other"}}}),
    ("labels removed", {"metadata": {"labels": None}}),
    ("owner references", {"metadata": {"ownerReferences": None}}),
    ("finalizers", {"metadata": {"finalizers": ["example.com/keep"]}}),
    ("the spec", {"spec": {"activeDeadlineSeconds": 1}}),
])
def test_the_adapter_may_change_nothing_else_on_a_pod(case: str, patch: dict[str, Any]) -> None:
    assert not admitted(POD, patched(POD, {"metadata": {"annotations": {COST: "100"}}, **patch}))


def test_the_adapter_may_set_a_serving_runtimes_replicas() -> None:
    runtime = serving_runtime()
    scaled = patched(runtime, {"spec": {"replicas": 4}})

    assert admitted(runtime, scaled)
    assert admitted(scaled, patched(scaled, {"spec": {"replicas": 2}}))


@pytest.mark.parametrize("field", [f for f in SERVING_RUNTIME_SPEC_FIELDS_NEWEST if f != "replicas"])
def test_every_other_serving_runtime_field_is_frozen(field: str) -> None:
    runtime = serving_runtime()
    changed = patched(runtime, {"spec": {"replicas": 3, field: {"changed": True}}})

    assert not admitted(runtime, changed)
    if field in runtime["spec"]:
        assert not admitted(runtime, patched(runtime, {"spec": {field: None}}))  # removing it too


@pytest.mark.parametrize(("case", "patch"), [
    ("the autoscaler class", {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "hpa"}}}),
    ("a label", {"metadata": {"labels": {"team": "x"}}}),
])
def test_the_adapter_may_not_touch_a_serving_runtimes_metadata(case: str, patch: dict[str, Any]) -> None:
    runtime = serving_runtime()
    assert not admitted(runtime, patched(runtime, patch))


@pytest.mark.parametrize("field", ["someFieldKServeAddsLater", "x"])
def test_a_serving_runtime_field_no_kserve_has_yet_is_frozen_too(field: str) -> None:
    """The policy named each field of the schemas it knew, so a field a later KServe adds (as v0.14 added
    workerSpec) was the adapter's to set until someone listed it; every field but `replicas` is frozen now."""
    runtime = serving_runtime()
    assert not admitted(runtime, patched(runtime, {"spec": {"replicas": 3, field: {"changed": True}}}))
    with_it = patched(runtime, {"spec": {field: "set by its owner"}})
    assert not admitted(with_it, patched(with_it, {"spec": {field: None}}))  # nor removed
    assert admitted(with_it, patched(with_it, {"spec": {"replicas": 5}}))  # and replicas still are the adapter's


@pytest.mark.parametrize("spec", [
    pytest.param({"hostIPC": True}, id="the host's IPC namespace"),
    pytest.param({"workerSpec": {"containers": [{"name": "worker", "image": "example.com/anything:latest"}]}},
                 id="a worker pod of its choosing"),
    pytest.param({"schedulerName": "example-scheduler"}, id="another scheduler"),
    pytest.param({"resourceClaims": [{"name": "gpu", "resourceClaimName": "someone-elses"}]}, id="a DRA claim"),
])
def test_the_adapter_may_not_set_fields_a_newer_kserve_added(spec: dict[str, Any]) -> None:
    """Where the ServingRuntime CRD comes from a newer KServe than modelmesh-serving's, the adapter's identity
    could set these along with its replicas; the policy named only v0.12's fields and let them through."""
    runtime = serving_runtime()
    assert not admitted(runtime, patched(runtime, {"spec": {"replicas": 3, **spec}}))


def test_the_adapter_may_adopt_a_runtime_scales_replicas() -> None:
    scale = runtime_scale()
    assert admitted(scale, patched(scale, {"spec": {"replicas": 8}}))


@pytest.mark.parametrize(("case", "patch"), [
    ("replicas the HPA set", {"spec": {"replicas": 5}}),
    ("another runtime", {"spec": {"servingRuntime": "other"}}),
    ("a Deployment named", {"spec": {"replicas": 8, "deployment": "modelmesh-serving-other"}}),
    ("a label", {"spec": {"replicas": 8}, "metadata": {"labels": {"team": "x"}}}),
    ("an annotation", {"spec": {"replicas": 8}, "metadata": {"annotations": {"example.com/x": "1"}}}),
    ("finalizers", {"spec": {"replicas": 8}, "metadata": {"finalizers": ["example.com/keep"]}}),
])
def test_the_adapter_may_change_nothing_else_on_a_runtime_scale(case: str, patch: dict[str, Any]) -> None:
    """Retargeted (`spec.servingRuntime`), a RuntimeScale's HPA would scale another runtime; its replicas, once
    set, are the HPA's."""
    scale = runtime_scale()
    old = patched(scale, {"spec": {"replicas": 3}}) if case == "replicas the HPA set" else scale
    assert not admitted(old, patched(old, patch))


def test_the_adapter_may_write_a_runtime_scales_status_whatever_its_replicas() -> None:
    """The bridge reports the runtime's replicas, selector and conditions through the status subresource, also
    once the HPA has set `spec.replicas` (which the main resource's rule keeps the adapter's hands off)."""
    scale = patched(runtime_scale(), {"spec": {"replicas": 3}})
    reported = patched(scale, {"status": {"replicas": 3, "selector": "name=modelmesh-serving-triton"}})
    assert admitted(scale, reported, subresource="status")


@pytest.mark.parametrize(("case", "patch"), [
    ("its replicas", {"spec": {"replicas": 9}}),
    ("another runtime", {"spec": {"servingRuntime": "other"}}),
    ("a label", {"metadata": {"labels": {"team": "x"}}}),
])
def test_a_runtime_scales_status_write_changes_only_its_status(case: str, patch: dict[str, Any]) -> None:
    """The Role grants `runtimescales/status`, which the policy did not match: a write through it was judged by
    RBAC alone. The API server keeps a status write to the status (for a custom resource with the subresource);
    the policy now says so as well, below RBAC, as it does for every other write it grants."""
    scale = patched(runtime_scale(), {"spec": {"replicas": 3}})
    assert not admitted(scale, patched(scale, {"status": {"replicas": 3}, **patch}), subresource="status")


@pytest.mark.parametrize("operation", ["CREATE", "DELETE"])
@pytest.mark.parametrize("kind", ["Pod", "RuntimeScale"])
def test_the_adapter_may_not_create_or_delete(operation: str, kind: str) -> None:
    obj = POD if kind == "Pod" else runtime_scale()
    new, old = (obj, None) if operation == "CREATE" else (None, obj)
    assert not admitted(old, new, operation=operation)


def test_other_users_are_not_restricted() -> None:
    assert admitted(POD, patched(POD, {"metadata": {"labels": {"name": "x"}}}), user="kubernetes-admin")


def test_the_policy_file_is_one_yaml_document() -> None:
    text = (BASE / "validating-admission-policy.yaml").read_text()
    assert len([d for d in yaml.safe_load_all(text) if d]) == 1
