"""The ValidatingAdmissionPolicies' CEL, compiled and evaluated with a CEL implementation (cel-python) against
the writes they must allow and refuse, the way the API server evaluates them: `object` is the object after the
patch, `oldObject` before it, `request` the admission request, `authorizer` the cluster's authorizer asked about
the request's user (tests/support/cel_authorizer.py, over `WHO_MAY`); a policy applies when every matchCondition
is true and denies when any validation is false, and a write is admitted when no policy denies it."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.kube.patches import merge_patch
from tests.fakes.kube.reviews import AccessRule
from tests.manifests.support import BASE, EXAMPLES, find, kustomize
from tests.support.cel_authorizer import FUNCTIONS, CelAuthorizer

ADAPTER = "system:serviceaccount:modelmesh-autoscaler:modelmesh-autoscaler"
COST = "controller.kubernetes.io/pod-deletion-cost"
ADAPTER_POLICY = "modelmesh-autoscaler-writes"
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
NS = "modelmesh-serving"
OWNER = "alice"
"""Of the team that runs ServingRuntime `triton`: may patch it, and create RuntimeScales."""
REVIEWER = "mallory"
"""The outside reviewer's user: may create and update RuntimeScales in the namespace, and no ServingRuntime."""
ARGO_CD = "system:serviceaccount:argocd:argocd-application-controller"
"""Argo CD's application controller as Argo CD installs it: every verb on everything."""
GITOPS_WITHOUT_RUNTIMES = "system:serviceaccount:argocd:team-b-deployer"
"""A GitOps identity granted RuntimeScales and HPAs in the namespace, not its ServingRuntimes."""
HPA_CONTROLLER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
WHO_MAY = (
    AccessRule(user=OWNER, verb="patch", group="serving.kserve.io", resource="servingruntimes", namespace=NS,
               name="triton"),
    AccessRule(user=OWNER, group="autoscaler.modelmesh.io", resource="runtimescales", namespace=NS),
    AccessRule(user=REVIEWER, group="autoscaler.modelmesh.io", resource="runtimescales", namespace=NS),
    AccessRule(user=REVIEWER, verb="patch", group="serving.kserve.io", resource="servingruntimes", namespace=NS,
               name="mine"),
    AccessRule(user=ARGO_CD),
    AccessRule(user=GITOPS_WITHOUT_RUNTIMES, group="autoscaler.modelmesh.io", resource="runtimescales"),
    AccessRule(user=HPA_CONTROLLER, verb="update", resource="*"),
)
"""Who may do what (RBAC as the authorizer answers it); the adapter's own grants do not matter here: its writes
are not checked with the authorizer."""
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


def policies() -> list[dict[str, Any]]:
    return [o for o in kustomize(BASE) if o["kind"] == "ValidatingAdmissionPolicy"]


def policy(name: str = ADAPTER_POLICY) -> dict[str, Any]:
    return find(kustomize(BASE), "ValidatingAdmissionPolicy", name)


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
    return environment.program(environment.compile(expression), functions=FUNCTIONS)


def refusal(old: dict[str, Any] | None, new: dict[str, Any] | None, *, user: str = ADAPTER,
            operation: str = "UPDATE", subresource: str = "") -> str | None:
    """The message the API server refuses this write with under the shipped policies, None where it is admitted;
    `subresource` (`status`, `scale`) for a write through it, which a rule matches only where it names
    `RESOURCE/SUBRESOURCE`."""
    target = new or old
    assert target is not None
    resource = {"Pod": "pods", "ServingRuntime": "servingruntimes", "RuntimeScale": "runtimescales"}[target["kind"]]
    activation: dict[str, Any] = {  # `authorizer` is no CEL value: an object the library's functions call
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": operation, "userInfo": {"username": user},
                                "resource": {"group": "", "version": "v1", "resource": resource},
                                "subResource": subresource, "namespace": target["metadata"].get("namespace", ""),
                                "name": target["metadata"]["name"]}),
        "authorizer": CelAuthorizer(user, ("system:authenticated",), WHO_MAY),
    }
    for spec in (p["spec"] for p in policies()):
        rules = spec["matchConstraints"]["resourceRules"]
        matched = f"{resource}/{subresource}" if subresource else resource
        if not any(matched in rule["resources"] and operation in rule["operations"] for rule in rules):
            continue  # a resource or operation the policy does not match
        if not all(program(c["expression"]).evaluate(activation) for c in spec["matchConditions"]):
            continue  # not whom the policy is for
        for validation in spec["validations"]:
            try:
                if not program(validation["expression"]).evaluate(activation):
                    return _message(validation, activation)
            except CELEvalError as error:
                return f"evaluation error: {error}"  # fails closed (failurePolicy: Fail)
    return None


def _message(validation: dict[str, Any], activation: dict[str, Any]) -> str:
    if "messageExpression" in validation:
        return str(program(validation["messageExpression"]).evaluate(activation))
    return str(validation["message"])


def admitted(old: dict[str, Any] | None, new: dict[str, Any] | None, *, user: str = ADAPTER,
             operation: str = "UPDATE", subresource: str = "") -> bool:
    """Whether the API server admits this write under the shipped policies (`refusal`)."""
    return refusal(old, new, user=user, operation=operation, subresource=subresource) is None


def patched(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = merge_patch(copy.deepcopy(obj), patch)
    return result


@pytest.mark.parametrize("name", [ADAPTER_POLICY, "modelmesh-autoscaler-runtime-scales"])
def test_every_expression_compiles(name: str) -> None:
    spec = policy(name)["spec"]
    for entry in [*spec["matchConditions"], *spec["validations"]]:
        program(entry["expression"])
        if "messageExpression" in entry:
            program(entry["messageExpression"])
    assert spec["failurePolicy"] == "Fail"
    bindings = [b for b in kustomize(BASE) if b["kind"] == "ValidatingAdmissionPolicyBinding"
                and b["spec"]["policyName"] == name]
    assert [b["spec"]["validationActions"] for b in bindings] == [["Deny"]]


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


@pytest.mark.parametrize("name", ["validating-admission-policy.yaml",
                                  "validating-admission-policy-runtime-scales.yaml"])
def test_the_policy_file_is_one_yaml_document(name: str) -> None:
    text = (BASE / name).read_text()
    assert len([d for d in yaml.safe_load_all(text) if d]) == 1


# Who may point a RuntimeScale at a ServingRuntime (validating-admission-policy-runtime-scales.yaml): the bridge
# carries its spec.replicas into the runtime with the adapter's rights, so a RuntimeScale is a runtime's replicas.

def someone_elses(replicas: int | None = 65535, runtime: str = "triton") -> dict[str, Any]:
    """The outside reviewer's RuntimeScale `not-mine`, naming ServingRuntime `runtime`."""
    scale = patched(runtime_scale(), {"metadata": {"name": "not-mine"}, "spec": {"servingRuntime": runtime}})
    return scale if replicas is None else patched(scale, {"spec": {"replicas": replicas}})


@pytest.mark.parametrize("replicas", [65535, 0, None])
def test_a_runtime_scale_for_someone_elses_runtime_is_refused(replicas: int | None) -> None:
    """The outside review: a user who may create RuntimeScales, and nothing on ServingRuntimes, created
    `not-mine` {servingRuntime: triton, replicas: 65535} and the adapter set triton's spec.replicas 2 -> 65535
    (0: an outage). Without replicas, their HPA would scale triton from the adoption on."""
    message = refusal(None, someone_elses(replicas), user=REVIEWER, operation="CREATE")

    assert message is not None
    assert "patch on servingruntimes (serving.kserve.io) triton in namespace modelmesh-serving" in message
    assert message in " ".join(OPERATIONS.read_text().split())  # the refusal the guide quotes


@pytest.mark.parametrize("replicas", [None, 3])
def test_the_runtimes_owner_may_create_its_runtime_scale(replicas: int | None) -> None:
    scale = runtime_scale() if replicas is None else patched(runtime_scale(), {"spec": {"replicas": replicas}})
    assert admitted(None, scale, user=OWNER, operation="CREATE")


def test_a_runtime_scale_may_not_be_pointed_at_someone_elses_runtime() -> None:
    """Created for a runtime of one's own, then retargeted: the check is on the runtime it names now."""
    mine = someone_elses(None, runtime="mine")
    assert admitted(None, mine, user=REVIEWER, operation="CREATE")

    assert not admitted(mine, patched(mine, {"spec": {"servingRuntime": "triton"}}), user=REVIEWER)
    assert admitted(someone_elses(None, runtime="other"), mine, user=REVIEWER)  # towards one's own: fine


@pytest.mark.parametrize("old_replicas", [None, 3])
def test_only_the_runtimes_owner_sets_replicas_through_the_main_resource(old_replicas: int | None) -> None:
    """`kubectl edit` or `patch` of spec.replicas is a write of the runtime's replicas too (the HPA writes through
    the scale subresource, below)."""
    scale = runtime_scale() if old_replicas is None else patched(runtime_scale(), {"spec": {"replicas": old_replicas}})
    flooded = patched(scale, {"spec": {"replicas": 65535}})

    assert not admitted(scale, flooded, user=REVIEWER)
    assert admitted(scale, flooded, user=OWNER)


@pytest.mark.parametrize(("case", "patch"), [
    ("a label", {"metadata": {"labels": {"team": "x"}}}),
    ("an annotation", {"metadata": {"annotations": {"example.com/x": "1"}}}),
    ("replicas removed (the runtime's adopted)", {"spec": {"replicas": None}}),
])
def test_a_runtime_scales_other_changes_need_no_right_on_the_runtime(case: str, patch: dict[str, Any]) -> None:
    scale = patched(runtime_scale(), {"spec": {"replicas": 3}})
    assert admitted(scale, patched(scale, patch), user=REVIEWER)


def test_the_hpas_scale_write_is_not_checked() -> None:
    """The HPA controller writes spec.replicas through the scale subresource, which the policy does not match: it
    scales within the bounds its owner set, a RuntimeScale that passed the check when it was created."""
    scale = patched(runtime_scale(), {"spec": {"replicas": 3}})
    assert admitted(scale, patched(scale, {"spec": {"replicas": 7}}), user=HPA_CONTROLLER, subresource="scale")


def test_gitops_needs_the_runtimes_right_too() -> None:
    """Argo CD applies with its own identity: as installed (every verb) it may; an identity granted
    RuntimeScales but not the ServingRuntimes may not, whoever committed the manifest."""
    scale = runtime_scale()
    assert admitted(None, scale, user=ARGO_CD, operation="CREATE")
    assert not admitted(None, scale, user=GITOPS_WITHOUT_RUNTIMES, operation="CREATE")
    assert admitted(scale, patched(scale, {"metadata": {"labels": {"team": "x"}}}), user=GITOPS_WITHOUT_RUNTIMES)


@settings(max_examples=40, deadline=None)
@given(replicas=st.one_of(st.none(), st.integers(min_value=0, max_value=65535)),
       runtime=st.sampled_from(["triton", "other", "mine-too"]))
def test_no_user_sets_a_runtime_it_may_not_patch(replicas: int | None, runtime: str) -> None:
    """For any replicas and any runtime but the one the reviewer may patch: their RuntimeScale is refused,
    created or retargeted; the owner of triton may create triton's alone."""
    scale = someone_elses(replicas, runtime=runtime)
    assert not admitted(None, scale, user=REVIEWER, operation="CREATE")
    mine = someone_elses(replicas, runtime="mine")
    assert not admitted(mine, scale, user=REVIEWER)
    assert admitted(None, scale, user=OWNER, operation="CREATE") == (runtime == "triton")
