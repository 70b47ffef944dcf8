"""Create, update and patch over HTTP, with the registry's rules for each.

The store accepts any change; this layer refuses what the API server refuses before storing: a name or
namespace that disagrees with the URL, a stale `resourceVersion` precondition (409), an update without one
where the type forbids it (leases: 422), writes to `status` through the main resource (kept: it is a
subresource), a patch format the resource does not take (415), and the validations tests should trip over.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.kube.leases import check_lease
from tests.fakes.kube.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    PatchFailed,
    check_patch_type,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from tests.fakes.kube.resources import LEASES, PODS, ResourceType
from tests.fakes.kube.schemas import pruned_and_checked
from tests.fakes.kube.store import ObjectKey, ObjectStore
from tests.fakes.kube.wire import JSON, ApiError, checked_object, json_copy
from tests.fakes.kube.workloads import check_pod_deletion_cost


class ObjectWrites(ObjectStore):
    """POST, PUT and PATCH of stored types, as the server's generic registry handles them."""

    def _post(self, rtype: ResourceType, namespace: str, body: Any) -> JSON:
        obj = checked_object(rtype, body)
        metadata = obj.setdefault("metadata", {})
        if rtype.namespaced:
            if metadata.get("namespace", namespace) != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            metadata["namespace"] = namespace
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                raise ApiError.invalid(
                    rtype.kind, rtype.group, "", [("metadata.name", "", "name or generateName is required")]
                )
            metadata["name"] = metadata["generateName"] + self._suffix()
        self._validate(rtype, obj, None)
        return self._create(rtype, obj)

    def _put(self, rtype: ResourceType, key: ObjectKey, body: Any) -> tuple[JSON, bool]:
        """The stored object and whether the PUT created it (the server answers 201 then)."""
        obj = checked_object(rtype, body)
        metadata = obj.setdefault("metadata", {})
        if metadata.get("name", key[1]) != key[1]:
            raise ApiError.bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name on the URL ({key[1]})"
            )
        metadata["name"] = key[1]
        if rtype.namespaced:
            if metadata.get("namespace", key[0]) != key[0]:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            metadata["namespace"] = key[0]
        existing = self._objects[rtype].get(key)
        if existing is None:
            if not rtype.create_on_update:
                raise ApiError.not_found(rtype, key[1])
            if metadata.get("resourceVersion"):
                # The server refuses to create with a precondition on a version that cannot exist.
                raise ApiError.not_found(rtype, key[1])
            self._validate(rtype, obj, None)
            return self._create(rtype, obj), True
        version = metadata.get("resourceVersion")
        if not version:
            if not rtype.unconditional_update:
                raise ApiError.invalid(
                    rtype.plural,
                    rtype.group,
                    key[1],
                    [("metadata.resourceVersion", 0, "must be specified for an update")],
                )
        elif version != existing["metadata"]["resourceVersion"]:
            raise ApiError.conflict(rtype, key[1])
        _keep_status(rtype, obj, existing)
        self._validate(rtype, obj, existing)
        return self._replace(rtype, key, existing, obj), False

    def _patch(self, rtype: ResourceType, key: ObjectKey, content_type: str, raw: bytes) -> JSON:
        check_patch_type(content_type, rtype.custom)
        existing = self._objects[rtype].get(key)
        if existing is None:
            raise ApiError.not_found(rtype, key[1])
        try:
            patch = json.loads(raw)
        except ValueError as error:
            raise ApiError.bad_request(f"error decoding patch: {error}") from None
        current = self._render(rtype, existing)
        if content_type == JSON_PATCH:
            try:
                patched = json_patch(current, patch)
            except PatchFailed as error:
                raise ApiError(
                    422,
                    "the server rejected our request due to an error in our request",
                    "Invalid",
                    {"causes": [{"message": str(error)}]},
                ) from None
        else:
            if not isinstance(patch, dict):
                raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != existing["metadata"]["resourceVersion"]:
                raise ApiError.conflict(rtype, key[1])
            merger = merge_patch if content_type == MERGE_PATCH else strategic_merge_patch
            patched = merger(current, patch)
        if not isinstance(patched, dict):
            raise ApiError.bad_request("the patch did not produce an object")
        patched.pop("kind", None)
        patched.pop("apiVersion", None)
        _keep_status(rtype, patched, existing)
        self._validate(rtype, patched, existing)
        return self._replace(rtype, key, existing, patched)

    def _validate(self, rtype: ResourceType, obj: JSON, old: JSON | None) -> None:
        """The few validations tests should trip over: string-valued labels and annotations, deletion cost,
        a Lease's times and counts, a custom resource's CRD schema (which also prunes `obj` in place)."""
        metadata = obj.get("metadata") or {}
        for key in ("labels", "annotations"):
            values = metadata.get(key) or {}
            if not isinstance(values, dict):
                raise ApiError.bad_request(
                    f"json: cannot unmarshal {type(values).__name__} into Go struct field ObjectMeta.metadata.{key}"
                    " of type map[string]string"
                )
            for value in values.values():
                if not isinstance(value, str):
                    kind = "number" if isinstance(value, int | float) else type(value).__name__
                    raise ApiError.bad_request(
                        f"json: cannot unmarshal {kind} into Go struct field ObjectMeta.metadata.{key} of type string"
                    )
        if rtype is PODS:
            check_pod_deletion_cost(obj, old)
        if rtype is LEASES:
            check_lease(obj)
        if rtype.custom:
            checked = pruned_and_checked(rtype.kind, rtype.group, rtype.plural, rtype.version, obj)
            if checked is not obj:
                obj.clear()
                obj.update(checked)


def _keep_status(rtype: ResourceType, obj: JSON, existing: JSON) -> None:
    """A write to the main resource of a type with a status subresource leaves `status` as stored."""
    if not rtype.status_subresource:
        return
    if "status" in existing:
        obj["status"] = json_copy(existing["status"])
    else:
        obj.pop("status", None)
