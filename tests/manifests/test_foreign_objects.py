"""The examples' custom resources of other projects (ServingRuntime, ScaledObject, TriggerAuthentication,
PodMonitor, PrometheusRule, Certificate, Issuer) against those projects' own CRD schemas, unknown fields
refused: kubectl applies with `--validate=strict`, which refuses a misspelt field, and without it the API
server prunes the field silently (a `pollingIntervall` would leave KEDA polling at its default).

The Kubernetes schemas kubernetes-validate ships know none of these kinds; `crd_schemas.json` holds their
structural schemas, made with `make_crd_schemas.py` from the CRD files its `sources` name.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.manifests.support import CERT_MANAGER, EXAMPLES, KEDA, PROMETHEUS, Object, installed
from tests.manifests.test_pod_resources_patch import runtime_with_patch

SCHEMAS: dict[str, Any] = json.loads((Path(__file__).parent / "crd_schemas.json").read_text())["schemas"]


def strict(schema: Any) -> Any:
    """The schema as the API server reads it, made to refuse what it would prune: an object with declared
    properties takes no others (unless it preserves unknown fields), and int-or-string takes both."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    schema = {key: strict(value) for key, value in schema.items() if key != "properties"} | (
        {"properties": {k: strict(v) for k, v in schema["properties"].items()}} if "properties" in schema else {})
    if schema.get("x-kubernetes-int-or-string"):
        schema.pop("type", None)
        schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (schema.get("type") == "object" and "properties" in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        schema["additionalProperties"] = False
    return schema


def problems(obj: Object) -> list[str]:
    schema = SCHEMAS[f"{obj['apiVersion']} {obj['kind']}"]
    validator = jsonschema.Draft7Validator(strict(schema))
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(obj)]


def foreign(directory: Path) -> list[Object]:
    return [o for o in installed(directory) if f"{o['apiVersion']} {o['kind']}" in SCHEMAS]


FOREIGN = [(directory, obj["kind"], obj["metadata"]["name"])
           for directory in (EXAMPLES, KEDA, CERT_MANAGER, PROMETHEUS) for obj in foreign(directory)]


def test_every_foreign_kind_the_examples_ship_has_its_schema() -> None:
    kinds = {f"{o['apiVersion']} {o['kind']}" for d in (EXAMPLES, KEDA, CERT_MANAGER, PROMETHEUS)
             for o in installed(d) if o["apiVersion"].split("/")[0] in
             {"serving.kserve.io", "keda.sh", "monitoring.coreos.com", "cert-manager.io"}}
    assert kinds == set(SCHEMAS), "update crd_schemas.json with make_crd_schemas.py"


@pytest.mark.parametrize(("directory", "kind", "name"), FOREIGN,
                         ids=[f"{d.name}/{k}/{n}" for d, k, n in FOREIGN])
def test_each_object_is_valid_for_its_projects_crd(directory: Path, kind: str, name: str) -> None:
    [obj] = [o for o in foreign(directory) if o["kind"] == kind and o["metadata"]["name"] == name]
    assert not problems(obj), f"{kind} {name} in {directory.name}: {problems(obj)}"


def test_the_runtime_with_the_pod_resources_patch_is_valid_too(tmp_path: Path) -> None:
    assert not problems(runtime_with_patch(tmp_path))


@pytest.mark.parametrize(("kind", "path", "typo"), [
    ("ScaledObject", ("spec",), ("pollingInterval", "pollingIntervall")),
    ("ServingRuntime", ("spec",), ("supportedModelFormats", "supportedModelFormat")),
])
def test_a_misspelt_field_is_refused(kind: str, path: tuple[str, ...], typo: tuple[str, str]) -> None:
    """The check itself: a field the CRD does not declare is found, as kubectl's strict validation finds it."""
    [obj] = [o for d in (EXAMPLES, KEDA) for o in foreign(d) if o["kind"] == kind]
    broken = copy.deepcopy(obj)
    parent = broken
    for key in path:
        parent = parent[key]
    parent[typo[1]] = parent.pop(typo[0])
    assert any(typo[1] in problem for problem in problems(broken)), problems(broken)
