"""The window between creating a RuntimeScale without `spec.replicas` and the adapter adopting the runtime's:
safe because the API server refuses to read its scale then (500, `ScaleREST.Get`), so the HPA and KEDA, which
read the scale before every write, cannot write it (tests/actuation/test_keda_adoption.py). Anything that gave
`spec.replicas` a value at creation would open it: a value nobody decided, carried to the runtime at once."""

from __future__ import annotations

from typing import Any

from tests.manifests.support import BASE, EXAMPLES, KEDA, kustomize, load_yaml

CRD = BASE / "custom-resource-definition-runtimescales.yaml"


def _defaults(schema: Any, path: str = "") -> list[str]:
    """Every place in an OpenAPI schema that sets a `default`."""
    if isinstance(schema, dict):
        found = [path or "."] if "default" in schema else []
        for key, value in schema.items():
            found += _defaults(value, f"{path}.{key}")
        return found
    if isinstance(schema, list):
        return [hit for index, item in enumerate(schema) for hit in _defaults(item, f"{path}[{index}]")]
    return []


def test_the_runtime_scale_schema_gives_spec_replicas_no_default() -> None:
    [version] = load_yaml(CRD)["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]

    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    assert "replicas" not in spec.get("required", [])  # it may be left out: the adapter adopts the runtime's
    assert _defaults(version["schema"]) == []


def test_no_shipped_object_fills_in_spec_replicas_at_admission() -> None:
    """A mutating webhook or MutatingAdmissionPolicy could not know the runtime's replicas either."""
    kinds = {obj["kind"] for directory in (BASE, EXAMPLES, KEDA) for obj in kustomize(directory)}

    assert not kinds & {"MutatingWebhookConfiguration", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}


def test_the_example_runtime_scale_leaves_spec_replicas_out() -> None:
    scales = [obj for obj in kustomize(EXAMPLES) if obj["kind"] == "RuntimeScale"]

    assert scales and all("replicas" not in obj["spec"] for obj in scales)
