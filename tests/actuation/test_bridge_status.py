"""What the replica bridge reports on a RuntimeScale, decided from what it read (docs/design.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.actuation.bridge_status import deployment_name, desired_status, selector_string, verdict
from tests.fakes.kube import parse_label_selector

JSON = dict[str, Any]


def scale(replicas: int | None = 3, runtime: str = "triton", generation: int = 2, status: JSON | None = None) -> JSON:
    spec: JSON = {"servingRuntime": runtime}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"metadata": {"namespace": "ml", "name": "triton", "generation": generation}, "spec": spec,
            "status": status or {}}


RUNTIME: JSON = {"metadata": {"name": "triton", "annotations": {"maxLoadingConcurrency": "2"}}, "spec": {}}
DEPLOYMENT: JSON = {
    "metadata": {"name": "modelmesh-serving-triton"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"name": "modelmesh-serving-triton",
                                                          "modelmesh-service": "modelmesh-serving"}}},
    "status": {"replicas": 4},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"name": "modelmesh-serving-triton", "modelmesh-service": "modelmesh-serving"}},
         "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]},
                               {"key": "canary", "operator": "DoesNotExist"},
                               {"key": "gpu", "operator": "Exists"}]},
         "!canary,gpu,tier in (a,b)"),
        ({"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
         "app=x,env notin (dev)"),
        (None, ""),
        ({}, ""),
    ],
    ids=["match-labels-sorted", "expressions", "both", "none", "empty"],
)
def test_selector_is_written_as_the_label_selector_string(selector: JSON | None, expected: str) -> None:
    assert selector_string(selector) == expected


@pytest.mark.parametrize(
    ("case", "runtime", "deployment", "cluster", "reason"),
    [
        ("bridged", RUNTIME, DEPLOYMENT, False, "Bridged"),
        ("runtime missing", None, None, False, "ServingRuntimeNotFound"),
        ("cluster runtime", None, None, True, "ClusterServingRuntime"),
        ("class hpa", {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "hpa"}}}, DEPLOYMENT,
         False, "AutoscalerClassConflict"),
        ("class external", {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "external"}}},
         DEPLOYMENT, False, "AutoscalerClassConflict"),
        ("class none is fine", {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "none"}}},
         DEPLOYMENT, False, "Bridged"),
        ("deployment missing", RUNTIME, None, False, "DeploymentNotFound"),
    ],
)
def test_ready_condition_says_why(
    case: str, runtime: JSON | None, deployment: JSON | None, cluster: bool, reason: str
) -> None:
    outcome = verdict(scale(), runtime, deployment, cluster_runtime=cluster)

    assert (outcome.reason, outcome.ready) == (reason, reason == "Bridged")


def test_a_scale_without_a_runtime_name_is_invalid() -> None:
    assert verdict(scale(runtime=""), None, None).reason == "InvalidSpec"


def test_a_scale_without_replicas_is_not_ready() -> None:
    assert verdict(scale(replicas=None), RUNTIME, DEPLOYMENT).reason == "NoReplicas"


def test_a_scale_without_replicas_whose_deployment_does_not_exist_is_not_waiting_for_a_scale_to_zero() -> None:
    """NoReplicas is the normal state of a runtime scaled to zero, and the shipped alert leaves it out; a
    RuntimeScale whose runtime has no Deployment at all (the controller not running, the runtime disabled) read
    NoReplicas too, and no alert ever said that its HPA's replicas reach nothing."""
    outcome = verdict(scale(replicas=None), RUNTIME, None)
    assert (outcome.ready, outcome.reason) == (False, "DeploymentNotFound")
    assert outcome.message.startswith("Deployment modelmesh-serving-triton of ServingRuntime triton does not exist")


def test_status_mirrors_the_deployment() -> None:
    status = desired_status(scale(), DEPLOYMENT, verdict(scale(), RUNTIME, DEPLOYMENT), "2026-01-01T00:00:00Z")

    assert status["replicas"] == 4  # pods that exist, as the Deployment's own scale subresource says
    assert status["selector"] == "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"
    assert status["observedGeneration"] == 2
    [ready] = status["conditions"]
    assert ready["type"] == "Ready" and ready["status"] == "True" and ready["reason"] == "Bridged"
    assert "modelmesh-serving-triton has 4 replicas" in ready["message"]


def test_a_runtime_scaled_to_zero_by_modelmesh_serving_says_so() -> None:
    idle = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 0}, "status": {"replicas": 0}}
    outcome = verdict(scale(replicas=3), RUNTIME, idle)

    assert (outcome.ready, outcome.reason) == (True, "Bridged")
    assert outcome.message == (
        "ServingRuntime triton spec.replicas follows this RuntimeScale (3); Deployment modelmesh-serving-triton "
        "has 0 replicas; modelmesh-serving scaled it to zero (no InferenceService uses the runtime) and starts it "
        "at 3 when one does")


def test_an_unchanged_condition_keeps_its_transition_time() -> None:
    before = desired_status(scale(), DEPLOYMENT, verdict(scale(), RUNTIME, DEPLOYMENT), "2026-01-01T00:00:00Z")
    again = scale(status=before)

    after = desired_status(again, DEPLOYMENT, verdict(again, RUNTIME, DEPLOYMENT), "2026-01-01T01:00:00Z")

    assert after == before  # nothing to write


def test_a_changed_condition_gets_a_new_transition_time() -> None:
    before = desired_status(scale(), DEPLOYMENT, verdict(scale(), RUNTIME, DEPLOYMENT), "2026-01-01T00:00:00Z")
    again = scale(status=before)

    after = desired_status(again, None, verdict(again, RUNTIME, None), "2026-01-01T01:00:00Z")

    [ready] = after["conditions"]
    assert (ready["status"], ready["lastTransitionTime"]) == ("False", "2026-01-01T01:00:00Z")
    assert after["selector"] == before["selector"]  # a Deployment gone for a moment keeps the HPA's selector


def test_the_deployment_name_follows_modelmesh_serving_unless_given() -> None:
    assert deployment_name(scale()) == "modelmesh-serving-triton"
    assert deployment_name({"spec": {"servingRuntime": "t", "deployment": "mm-t"}}) == "mm-t"


# ---- the selector string selects exactly what the LabelSelector selects ----

_KEYS = st.sampled_from(["name", "modelmesh-service", "app.kubernetes.io/name", "tier"])
_VALUES = st.sampled_from(["a", "b", "modelmesh-serving", "x-1"])


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """`metav1.LabelSelector` semantics, written from the API reference."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


_EXPRESSIONS = st.one_of(
    st.builds(lambda k, o, v: {"key": k, "operator": o, "values": v}, _KEYS, st.sampled_from(["In", "NotIn"]),
              st.lists(_VALUES, min_size=1, max_size=3, unique=True)),
    st.builds(lambda k, o: {"key": k, "operator": o}, _KEYS, st.sampled_from(["Exists", "DoesNotExist"])),
)


@given(
    match_labels=st.dictionaries(_KEYS, _VALUES, max_size=3),
    expressions=st.lists(_EXPRESSIONS, max_size=3),
    labels=st.dictionaries(_KEYS, _VALUES, max_size=4),
)
def test_the_status_selector_selects_the_same_pods_as_the_deployments_selector(
    match_labels: dict[str, str], expressions: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    selector: dict[str, Any] = {"matchLabels": match_labels, "matchExpressions": expressions}
    text = selector_string(selector)
    parsed = parse_label_selector(text)  # the fake API server's parser, after Kubernetes' labels.Parse

    assert all(r.matches(labels) for r in parsed) == _selects(selector, labels)


CLASS_HPA: JSON = {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "hpa"}}, "spec": {}}
ONE_PATCH = ("kubectl -n ml patch servingruntime triton --type merge -p '{\"metadata\":{\"annotations\":"
             "{\"serving.kserve.io/autoscalerClass\":null}},\"spec\":{\"replicas\":%s}}'")


@pytest.mark.parametrize("running", [1, 3, 17])
def test_a_class_conflict_gives_the_one_patch_that_keeps_the_running_replicas(running: int) -> None:
    """The annotation removed alone, modelmesh-serving sets the Deployment to podsPerRuntime at once: the message
    ends with the command that removes it and sets spec.replicas to what runs, in one patch."""
    deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": running}}
    outcome = verdict(scale(replicas=None), CLASS_HPA, deployment)

    assert (outcome.ready, outcome.reason) == (False, "AutoscalerClassConflict")
    assert outcome.message.endswith(": " + ONE_PATCH % running), outcome.message
    assert f"Deployment modelmesh-serving-triton runs ({running}) in one patch" in outcome.message
    assert "publishes no pod selector" in outcome.message


def test_a_class_conflict_says_what_a_runtimescale_with_replicas_then_carries() -> None:
    outcome = verdict(scale(replicas=3), CLASS_HPA, DEPLOYMENT)

    assert "then the bridge carries this RuntimeScale's spec.replicas (3): " + ONE_PATCH % 3 in outcome.message


def test_a_class_conflict_without_the_deployment_names_how_to_read_its_replicas() -> None:
    outcome = verdict(scale(replicas=None), CLASS_HPA, None)

    assert outcome.message.endswith(": " + ONE_PATCH % "N"), outcome.message
    assert ("N is its spec.replicas (kubectl -n ml get deployment modelmesh-serving-triton -o "
            "jsonpath='{.spec.replicas}')") in outcome.message


def test_a_class_conflict_of_a_runtime_scaled_to_zero_never_sets_it_to_zero() -> None:
    """At 0 (modelmesh-serving's scale to zero) nothing runs: spec.replicas 0 would keep the runtime at 0 once an
    InferenceService uses it, so the step is the annotation's removal alone."""
    idle = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 0}, "status": {"replicas": 0}}
    outcome = verdict(scale(replicas=None), CLASS_HPA, idle)

    assert '"replicas":' not in outcome.message
    assert outcome.message.endswith(
        "scaled to zero (no InferenceService uses the runtime), so no pod goes, and it starts at spec.replicas, "
        "else podsPerRuntime, which this RuntimeScale adopts when one does: "
        "kubectl -n ml annotate servingruntime triton serving.kserve.io/autoscalerClass-"), outcome.message
