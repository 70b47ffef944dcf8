"""Custom resources checked against their CRD's `openAPIV3Schema`, as apiextensions-apiserver checks every
write of the main resource, `status` and `scale`: unknown fields are pruned (dropped without an error, so a
field the schema lacks never reaches the object), then a value of the wrong type, out of its bounds or enum,
or a missing required field is a 422 Invalid naming the field.

Only the adapter's own CRD (`manifests/base/custom-resource-definition-runtimescales.yaml`, read from the
repository, so the fake follows the manifest) has a schema here; KServe's runtimes are stored as given. The
messages follow the server's shape (`RuntimeScale.autoscaler.modelmesh.io "x" is invalid: field: ...`); the
detail after the field is jsonschema's wording, not kube-openapi's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Final

import jsonschema
import yaml

from tests.fakes.kube.wire import JSON, ApiError, FieldError

_CRD_FILES: Final = {
    ("autoscaler.modelmesh.io", "runtimescales"): Path(__file__).parents[3] / "manifests" / "base"
    / "custom-resource-definition-runtimescales.yaml",
}
_METADATA: Final = ("apiVersion", "kind", "metadata")


def _bits(size: int) -> Any:
    def within(value: object) -> bool:
        return not isinstance(value, int) or -(2 ** (size - 1)) <= value < 2 ** (size - 1)
    return within


_FORMATS: Final = jsonschema.FormatChecker()
_FORMATS.checks("int32")(_bits(32))
_FORMATS.checks("int64")(_bits(64))


@functools.cache
def crd_schema(group: str, plural: str, version: str) -> JSON | None:
    """The served version's `openAPIV3Schema` of a CRD the fake knows the file of, else None."""
    path = _CRD_FILES.get((group, plural))
    if path is None:
        return None
    crd = yaml.safe_load(path.read_text())
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return dict(served["schema"]["openAPIV3Schema"])
    return None


def pruned_and_checked(kind: str, group: str, plural: str, version: str, obj: JSON) -> JSON:
    """`obj` without the fields its schema does not declare; a 422 when what is left does not validate."""
    schema = crd_schema(group, plural, version)
    if schema is None:
        return obj
    kept = {key: value for key, value in obj.items() if key in _METADATA}
    kept.update(_prune({key: value for key, value in obj.items() if key not in _METADATA}, schema))
    validator = jsonschema.Draft4Validator(schema, format_checker=_FORMATS)
    errors = sorted(validator.iter_errors({key: value for key, value in kept.items() if key != "metadata"}),
                    key=lambda error: list(map(str, error.absolute_path)))
    if errors:
        name = (obj.get("metadata") or {}).get("name", "")
        raise ApiError.invalid_fields(kind, group, name, [_field_error(error) for error in errors])
    return kept


def _prune(value: Any, schema: JSON) -> Any:
    if isinstance(value, dict) and schema.get("type") == "object" and "properties" in schema \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        return {key: _prune(item, schema["properties"][key]) for key, item in value.items()
                if key in schema["properties"]}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(item, schema["items"]) for item in value]
    return value


def _field(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _field_error(error: jsonschema.ValidationError) -> FieldError:
    where = _field(error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return FieldError(f"{where}.{missing}" if where else missing, "FieldValueRequired", "Required value")
    if error.validator == "enum":
        return FieldError.not_supported(where, str(error.instance), [str(v) for v in error.validator_value])
    return FieldError(where, "FieldValueInvalid", f"Invalid value: {error.instance!r}: {error.message}")
