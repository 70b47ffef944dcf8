"""The three PATCH formats the API server accepts, applied to plain JSON.

- `merge_patch`: RFC 7386 (`application/merge-patch+json`).
- `strategic_merge_patch`: Kubernetes' strategic merge (`application/strategic-merge-patch+json`) for the
  lists tests touch: those keyed by a `patchMergeKey` merge item by item, any other list is replaced.
- `json_patch`: RFC 6902 (`application/json-patch+json`); a failed operation raises `PatchFailed`, which the
  server answers with 422.

Preconditions, the status subresource and validation are the server's part (`writes.py`), not the formats'.
"""

from __future__ import annotations

from typing import Any, Final

from tests.fakes.kube.wire import ApiError, json_copy

MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
SUPPORTED_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)
ADVERTISED_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
"""What a 415 lists as accepted, as the real server does, although server-side apply is not modelled."""
CUSTOM_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH)
CUSTOM_ADVERTISED_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)
"""A custom resource (and its `status` and `scale`) takes no strategic merge patch: apiextensions-apiserver's
handler passes only these to `PatchResource` (customresource_handler.go), so kubectl's default
`kubectl patch` is a 415 there and `--type merge` or `--type json` is what works."""


def check_patch_type(content_type: str, custom: bool) -> None:
    """The 415 the server answers a PATCH in a format it does not take for the resource (`custom`: a custom
    resource, which takes no strategic merge patch)."""
    supported, advertised = ((CUSTOM_PATCH_TYPES, CUSTOM_ADVERTISED_PATCH_TYPES) if custom
                             else (SUPPORTED_PATCH_TYPES, ADVERTISED_PATCH_TYPES))
    if content_type not in supported:
        raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                       + ", ".join(advertised), "UnsupportedMediaType")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Merge keys of the lists tests touch, from the `patchMergeKey` struct tags of the core and apps types.
_STRATEGIC_MERGE_KEYS: Final = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "tolerations": "key",
    "imagePullSecrets": "name",
}


def strategic_merge_patch(target: Any, patch: Any, list_key: str | None = None) -> Any:
    """Strategic merge patch for the cases tests need: maps merge like a merge patch, known lists merge by key."""
    if isinstance(patch, list) and list_key and isinstance(target, list):
        merged = [json_copy(item) for item in target]
        for item in patch:
            key = item.get(list_key) if isinstance(item, dict) else None
            index = next(
                (
                    i
                    for i, old in enumerate(merged)
                    if isinstance(old, dict) and key is not None and old.get(list_key) == key
                ),
                None,
            )
            if isinstance(item, dict) and item.get("$patch") == "delete":
                if index is not None:
                    merged.pop(index)
            elif index is None:
                merged.append(json_copy(item))
            else:
                merged[index] = strategic_merge_patch(merged[index], item)
        return merged
    if not isinstance(patch, dict):
        return json_copy(patch)
    if patch.get("$patch") == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, _STRATEGIC_MERGE_KEYS.get(key))
    return result


class PatchFailed(Exception):
    """A JSON patch operation could not be applied (the server answers 422)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchFailed(f"invalid JSON pointer: {path!r}")
    return [token.replace("~1", "/").replace("~0", "~") for token in path.split("/")[1:]]


def _resolve(document: Any, tokens: list[str]) -> tuple[Any, str]:
    """The container holding the last token, and that token."""
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")
    return node, tokens[-1]


def _get(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        return document
    container, last = _resolve(document, tokens)
    if isinstance(container, dict) and last in container:
        return container[last]
    if isinstance(container, list) and last.isdigit() and int(last) < len(container):
        return container[int(last)]
    raise PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")


def _add(document: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    container, last = _resolve(document, tokens)
    if isinstance(container, dict):
        container[last] = value
    elif isinstance(container, list):
        if last == "-":
            container.append(value)
        elif last.isdigit() and int(last) <= len(container):
            container.insert(int(last), value)
        else:
            raise PatchFailed(f"add operation does not apply: index out of range: {last}")
    else:
        raise PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")
    return document


def _remove(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchFailed("cannot remove the whole document")
    container, last = _resolve(document, tokens)
    if isinstance(container, dict) and last in container:
        return container.pop(last)
    if isinstance(container, list) and last.isdigit() and int(last) < len(container):
        return container.pop(int(last))
    raise PatchFailed(f"remove operation does not apply: doc is missing path: /{'/'.join(tokens)}")


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test; JSON pointers with ~0 / ~1 escapes."""
    if not isinstance(operations, list):
        raise ApiError.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    document = json_copy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation:
            raise PatchFailed(f"unexpected kind of operation: {operation!r}")
        op = operation["op"]
        tokens = _pointer(operation.get("path"))
        if op == "add":
            document = _add(document, tokens, json_copy(operation.get("value")))
        elif op == "remove":
            _remove(document, tokens)
        elif op == "replace":
            _get(document, tokens)
            if tokens:
                container, last = _resolve(document, tokens)
                container[int(last) if isinstance(container, list) else last] = json_copy(operation.get("value"))
            else:
                document = json_copy(operation.get("value"))
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from"))
            value = _remove(document, source) if op == "move" else json_copy(_get(document, source))
            document = _add(document, tokens, value)
        elif op == "test":
            if _get(document, tokens) != operation.get("value"):
                raise PatchFailed("testing value /" + "/".join(tokens) + " failed: test failed")
        else:
            raise PatchFailed(f"Unexpected kind: {op}")
    return document
