"""The `status` and `scale` subresources of the types that declare them (`ResourceType.subresources`).

Kept as the API server does it (apiextensions-apiserver `customresource/status_strategy.go`, `scale.go`):

- `status`: GET returns the whole object; PUT and PATCH change only `.status` (the rest of the body or of the
  patched object is ignored); a `metadata.resourceVersion` in the body is a precondition (409 when stale). A
  write that changes nothing emits no event and keeps the resourceVersion.
- `scale`: an `autoscaling/v1` `Scale` built from the CRD's paths: `metadata` (name, namespace, uid,
  resourceVersion, creationTimestamp), `spec.replicas` (omitted when 0, Go `omitempty`), `status.replicas`
  (always present, 0 when the path is empty) and `status.selector` (omitted when empty). GET of an object whose
  spec replicas path holds no value is a 500 InternalError ("the spec replicas field ".spec.replicas" does not
  exist"), as the docs promise. PUT takes a Scale (its `resourceVersion` a precondition) and writes
  `spec.replicas` into the object; PATCH patches the Scale and does the same, also on an object with no
  replicas yet (`kubectl scale` works there; a patch that leaves them unset is a 400). A negative count is 422.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.kube.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    PatchFailed,
    check_patch_type,
    json_patch,
    merge_patch,
)
from tests.fakes.kube.patches import strategic_merge_patch as _strategic
from tests.fakes.kube.resources import ResourceType, ScalePaths
from tests.fakes.kube.store import ObjectKey
from tests.fakes.kube.wire import JSON, ApiError, json_copy
from tests.fakes.kube.writes import ObjectWrites


class Subresources(ObjectWrites):
    """GET, PUT and PATCH on `.../{name}/status` and `.../{name}/scale`."""

    def _subresource(self, method: str, rtype: ResourceType, key: ObjectKey, sub: str, body: bytes,
                     content_type: str) -> JSON:
        if sub not in rtype.subresources:
            raise ApiError.no_such_path()
        existing = self._objects[rtype].get(key)
        if existing is None:
            raise ApiError.not_found(rtype, key[1])
        if method not in ("GET", "PUT", "PATCH"):
            raise ApiError.method_not_allowed()
        if sub == "status":
            return self._status_write(rtype, key, existing, method, body, content_type)
        assert rtype.scale is not None
        return self._scale_write(rtype, key, existing, rtype.scale, method, body, content_type)

    def _status_write(self, rtype: ResourceType, key: ObjectKey, existing: JSON, method: str, body: bytes,
                      content_type: str) -> JSON:
        if method == "GET":
            return self._render(rtype, existing)
        current = self._render(rtype, existing)
        changed = _decode(body) if method == "PUT" else _apply(current, body, content_type, rtype.custom)
        _precondition(rtype, key, existing, changed)
        new = json_copy(existing)
        if isinstance(changed.get("status"), dict):
            new["status"] = changed["status"]
        else:
            new.pop("status", None)
        self._validate(rtype, new, existing)
        return self._replace(rtype, key, existing, new)

    def _scale_write(self, rtype: ResourceType, key: ObjectKey, existing: JSON, paths: ScalePaths, method: str,
                     body: bytes, content_type: str) -> JSON:
        if method == "GET":
            return _scale_of(rtype, existing, paths)
        scale = _scale_of(rtype, existing, paths, unset=_UNSET_REPLICAS)
        changed = _decode(body) if method == "PUT" else _apply(scale, body, content_type, rtype.custom)
        _precondition(rtype, key, existing, changed)
        replicas = (changed.get("spec") or {}).get("replicas", 0)
        if replicas == _UNSET_REPLICAS:
            raise ApiError.bad_request(f'the spec replicas field "{paths.spec_replicas}" cannot be empty')
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise ApiError.bad_request("json: cannot unmarshal value into Go struct field ScaleSpec.spec.replicas "
                                       "of type int32")
        if replicas < 0:
            raise ApiError.invalid("Scale", "autoscaling", key[1],
                                   [("spec.replicas", replicas, "must be greater than or equal to 0")])
        new = json_copy(existing)
        _set(new, paths.spec_replicas, replicas)
        self._validate(rtype, new, existing)
        self._replace(rtype, key, existing, new)
        return _scale_of(rtype, self._objects[rtype][key], paths)


_UNSET_REPLICAS = -2147483648
"""The API server's stand-in for a spec replicas path with no value while it writes the scale (`ScaleREST.Update`
in apiextensions-apiserver): a write that sets replicas succeeds, a patch that leaves them unset is a 400."""


def _scale_of(rtype: ResourceType, obj: JSON, paths: ScalePaths, unset: int | None = None) -> JSON:
    metadata = obj["metadata"]
    found, spec_replicas = _get(obj, paths.spec_replicas)
    if not found and unset is not None:
        found, spec_replicas = True, unset
    if not found:
        raise ApiError(500, f'Internal error occurred: the spec replicas field "{paths.spec_replicas}" does not exist',
                       "InternalError", {"causes": [{"message": f'the spec replicas field "{paths.spec_replicas}" '
                                                                "does not exist"}]})
    status_replicas = _get(obj, paths.status_replicas)[1] or 0
    selector = _get(obj, paths.label_selector)[1] if paths.label_selector else None
    scale: JSON = {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {key: metadata[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                                     "creationTimestamp") if key in metadata},
        "spec": {"replicas": spec_replicas} if spec_replicas else {},
        "status": {"replicas": status_replicas},
    }
    if selector:
        scale["status"]["selector"] = selector
    return scale


def _decode(body: bytes) -> JSON:
    try:
        document = json.loads(body)
    except ValueError as error:
        raise ApiError.bad_request(f"error decoding body: {error}") from None
    if not isinstance(document, dict):
        raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    return document


def _apply(current: JSON, body: bytes, content_type: str, custom: bool) -> JSON:
    check_patch_type(content_type, custom)
    try:
        patch = json.loads(body)
    except ValueError as error:
        raise ApiError.bad_request(f"error decoding patch: {error}") from None
    if content_type == JSON_PATCH:
        try:
            result = json_patch(current, patch)
        except PatchFailed as error:
            raise ApiError(422, "the server rejected our request due to an error in our request", "Invalid",
                           {"causes": [{"message": str(error)}]}) from None
    elif content_type == MERGE_PATCH:
        result = merge_patch(current, patch)
    else:
        result = _strategic(current, patch)
    if not isinstance(result, dict):
        raise ApiError.bad_request("the patch did not produce an object")
    return result


def _precondition(rtype: ResourceType, key: ObjectKey, existing: JSON, body: JSON) -> None:
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    if wanted and wanted != existing["metadata"]["resourceVersion"]:
        raise ApiError.conflict(rtype, key[1])


def _get(obj: JSON, path: str) -> tuple[bool, Any]:
    node: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _set(obj: JSON, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
