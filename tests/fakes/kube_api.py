"""A fake Kubernetes API server that speaks the real wire format, shared by every test that needs one.

No kube-apiserver runs where the tests run, yet the adapter talks to one in several ways: it discovers runtime
Deployments and watches their pods, writes `pod-deletion-cost` annotations with merge patches, elects a leader
with a `coordination.k8s.io/v1` Lease, authorizes HPA requests with SubjectAccessReviews and reads the
aggregator's front-proxy settings from `kube-system/extension-apiserver-authentication`. This module is one
aiohttp server on 127.0.0.1 that answers those calls with the JSON the real server sends, so the real
`kubernetes` client, `kubernetes.aio` and `kubectl` can be pointed at it unchanged, and tests can break it on
purpose (failures, slow answers, expired watches, an outage).

Kept as the real server does it (checked against kubernetes/apiserver sources):

- Errors are `Status` objects (`kind: Status, apiVersion: v1, metadata: {}, status: Failure, message, reason,
  code, details`) with the real reasons and messages: NotFound, AlreadyExists, Conflict ("the object has been
  modified; ..."), Invalid (422, "X is invalid: field: Invalid value: ...: detail"), Expired (410),
  UnsupportedMediaType (415), TooManyRequests (429 with `Retry-After` and `details.retryAfterSeconds`).
- One resourceVersion counter for all objects, like etcd's revision. Lists carry it in `metadata`; list items
  carry no `kind`/`apiVersion`; single objects and watch events do. Empty `labels`/`annotations` are omitted.
- Watches stream JSON lines `{"type": ..., "object": ...}` (HTTP 200, chunked): resourceVersion ""/"0"/absent
  sends synthetic ADDED events for the current state first; a version sends every later event; a version older
  than the retained history gets one ERROR event carrying a 410 `Expired` Status ("too old resource version:
  R (oldest)") and the stream ends. A label-selected watcher sees an object that stops matching as DELETED and
  one that starts matching as ADDED. BOOKMARKs only when `allowWatchBookmarks` is set. `timeoutSeconds` ends
  the stream cleanly. `watch` is parsed like the server's bool conversion: anything but "", "0", "false"
  (any case) is true, so `kubernetes_asyncio`'s `watch=True` works.
- PATCH accepts `application/merge-patch+json` (RFC 7386), `application/strategic-merge-patch+json` and
  `application/json-patch+json` (RFC 6902); anything else is 415. A `metadata.resourceVersion` in the patch is a
  precondition (409 when stale). Writes to the main resource keep `status` (it is a subresource). A no-op
  write does not bump resourceVersion and emits no event. `controller.kubernetes.io/pod-deletion-cost` must
  parse as a 32-bit integer (422), and annotation values must be strings (400), as in pod validation.
- Leases: PUT with a stale resourceVersion is 409 Conflict, PUT without one is 422 (leases do not allow
  unconditional updates), PUT of a missing Lease creates it, POST of an existing name is 409 AlreadyExists.
- SubjectAccessReview and TokenReview are validated like the server does and echoed with a `status`; creation
  answers 201. An unknown token gets `status: {user: {}, error: ...}`: `authenticated` is omitted, as Go's
  `omitempty` drops a false bool. Authenticated users get the `system:authenticated` group added.
- `/version`, `/api`, `/apis` and per-group-version APIResourceLists, enough for `kubectl get`.

Not modelled: admission, defaulting beyond what tests read, server-side apply (415), protobuf, managed fields,
pagination (`limit` is ignored: allowed by the API), graceful deletion through the API (DELETE removes at once:
there is no kubelet; `delete_pod(..., graceful=True)` shows a terminating pod instead). Strategic merge knows
the merge keys of the lists tests touch (containers, conditions, ...); other lists are replaced.

Forcing a client through the 410 path: `kube.end_watches(); <some change>; kube.compact()`: the client resumes
from a version that is no longer retained.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import itertools
import json
import re
import signal
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import yaml
from aiohttp import web
from aiohttp.typedefs import Handler

JSON = dict[str, Any]

# --------------------------------------------------------------------------------------------------------------
# Resource types
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource, with the registry-strategy flags that change how writes behave."""

    group: str
    version: str
    plural: str
    kind: str
    singular: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    unconditional_update: bool = True  # PUT without resourceVersion allowed (leases: no)
    create_on_update: bool = False  # PUT of a missing object creates it (leases: yes)
    status_subresource: bool = False  # writes to the main resource keep the old status
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    stored: bool = True  # reviews are create-only and never stored

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The group-qualified resource as errors spell it: `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str) -> JSON:
        details: JSON = {"name": name}
        if self.group:
            details["group"] = self.group
        details["kind"] = self.plural
        return details


PODS: Final = ResourceType("", "v1", "pods", "Pod", "pod", short_names=("po",), status_subresource=True)
CONFIGMAPS: Final = ResourceType("", "v1", "configmaps", "ConfigMap", "configmap", short_names=("cm",))
DEPLOYMENTS: Final = ResourceType(
    "apps", "v1", "deployments", "Deployment", "deployment", short_names=("deploy",), status_subresource=True
)
LEASES: Final = ResourceType(
    "coordination.k8s.io", "v1", "leases", "Lease", "lease", unconditional_update=False, create_on_update=True
)
SUBJECT_ACCESS_REVIEWS: Final = ResourceType(
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    "SubjectAccessReview",
    "subjectaccessreview",
    namespaced=False,
    verbs=("create",),
    stored=False,
)
TOKEN_REVIEWS: Final = ResourceType(
    "authentication.k8s.io",
    "v1",
    "tokenreviews",
    "TokenReview",
    "tokenreview",
    namespaced=False,
    verbs=("create",),
    stored=False,
)
RESOURCE_TYPES: Final = (PODS, CONFIGMAPS, DEPLOYMENTS, LEASES, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS)
_BY_PATH: Final = {(t.group, t.version, t.plural): t for t in RESOURCE_TYPES}

POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
AUTH_CONFIGMAP: Final = ("kube-system", "extension-apiserver-authentication")
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, "application/apply-patch+yaml")
_FIRST_RESOURCE_VERSION: Final = 1000
_HISTORY_LIMIT: Final = 10_000

# --------------------------------------------------------------------------------------------------------------
# Errors as the API server writes them
# --------------------------------------------------------------------------------------------------------------

_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_DEFAULT_MESSAGES: Final = {
    401: "Unauthorized",
    403: "forbidden: the fake API server was told to refuse this request",
    404: "the server could not find the requested resource",
    409: "the server reported a conflict",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request",
    504: "Timeout: request did not complete within requested timeout - context deadline exceeded",
}
_OPTIMISTIC_LOCK: Final = "the object has been modified; please apply your changes to the latest version and try again"


def status_object(code: int, message: str, reason: str | None = None, details: JSON | None = None) -> JSON:
    """A failure `Status` exactly as the API server serializes it."""
    status: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason if reason is not None else _REASONS.get(code, ""),
        "code": code,
    }
    if details:
        status["details"] = details
    return status


class ApiError(Exception):
    """An error answer: turned into a Status response by the server's middleware."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: JSON | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.details = details
        self.headers = dict(headers or {})

    def status(self) -> JSON:
        return status_object(self.code, self.message, self.reason, self.details)

    @classmethod
    def not_found(cls, rtype: ResourceType, name: str) -> ApiError:
        return cls(404, f'{rtype.qualified} "{name}" not found', "NotFound", rtype.details(name))

    @classmethod
    def already_exists(cls, rtype: ResourceType, name: str) -> ApiError:
        return cls(409, f'{rtype.qualified} "{name}" already exists', "AlreadyExists", rtype.details(name))

    @classmethod
    def conflict(cls, rtype: ResourceType, name: str) -> ApiError:
        message = f'Operation cannot be fulfilled on {rtype.qualified} "{name}": {_OPTIMISTIC_LOCK}'
        return cls(409, message, "Conflict", rtype.details(name))

    @classmethod
    def invalid(cls, kind: str, group: str, name: str, causes: Sequence[tuple[str, Any, str]]) -> ApiError:
        """422 as `errors.NewInvalid` builds it; causes are (field, bad value, detail)."""
        rendered = [f"{fld}: Invalid value: {_go_value(value)}: {detail}" for fld, value, detail in causes]
        joined = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
        qualified = f"{kind}.{group}" if group else kind
        details: JSON = {"name": name}
        if group:
            details["group"] = group
        details["kind"] = kind
        details["causes"] = [
            {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {_go_value(value)}: {detail}",
                "field": fld,
            }
            for fld, value, detail in causes
        ]
        return cls(422, f'{qualified} "{name}" is invalid: {joined}', "Invalid", details)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, message, "BadRequest")


def _go_value(value: Any) -> str:
    """How field.Invalid prints a bad value: strings quoted, null as null, numbers plain."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------------------------

_SET_REQUIREMENT = re.compile(r"^([^\s=!(),]+)\s+(in|notin)\s+\(([^()]*)\)$")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value in self.values
        if self.op == "!=":
            return not present or value not in self.values
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_terms(text: str) -> list[str]:
    """Split a selector on the commas that are not inside `in (...)` sets."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term.strip() for term in terms if term.strip()]


def parse_label_selector(text: str | None) -> list[_Requirement]:
    """Parse equality-based (`a=b`, `a==b`, `a!=b`), existence (`a`, `!a`) and set-based requirements."""
    requirements: list[_Requirement] = []
    for term in _split_terms(text or ""):
        if match := _SET_REQUIREMENT.match(term):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(_Requirement(match.group(1), match.group(2), values))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            requirements.append(_Requirement(key.strip(), "!=", frozenset({value.strip()})))
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            requirements.append(_Requirement(key.strip(), "=", frozenset({value.strip()})))
        elif term.startswith("!"):
            requirements.append(_Requirement(term[1:].strip(), "!"))
        else:
            requirements.append(_Requirement(term, "exists"))
    for requirement in requirements:
        if not requirement.key or any(c in requirement.key for c in " ()!=,"):
            raise ApiError.bad_request(f"unable to parse requirement: found '{requirement.key}', expected: key")
    return requirements


_FIELD_PATHS: Final = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
    "status.podIP": ("status", "podIP"),
    "spec.holderIdentity": ("spec", "holderIdentity"),
}


def parse_field_selector(text: str | None) -> list[tuple[tuple[str, ...], bool, str]]:
    """Equality field selectors on the few fields the real server indexes for these kinds."""
    requirements: list[tuple[tuple[str, ...], bool, str]] = []
    for term in _split_terms(text or ""):
        match = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", term)
        if match is None:
            raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        key, operator, value = match.groups()
        if key not in _FIELD_PATHS:
            raise ApiError.bad_request(f"field label not supported: {key}")
        requirements.append((_FIELD_PATHS[key], operator == "!=", value))
    return requirements


def _field_value(obj: JSON, path: tuple[str, ...]) -> str:
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return "" if node is None else str(node)


# --------------------------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
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
        merged = [copy.deepcopy(item) for item in target]
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
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = strategic_merge_patch(merged[index], item)
        return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, _STRATEGIC_MERGE_KEYS.get(key))
    return result


class _PatchFailed(Exception):
    """A JSON patch operation could not be applied (the server answers 422)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise _PatchFailed(f"invalid JSON pointer: {path!r}")
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
            raise _PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")
    return node, tokens[-1]


def _get(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        return document
    container, last = _resolve(document, tokens)
    if isinstance(container, dict) and last in container:
        return container[last]
    if isinstance(container, list) and last.isdigit() and int(last) < len(container):
        return container[int(last)]
    raise _PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")


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
            raise _PatchFailed(f"add operation does not apply: index out of range: {last}")
    else:
        raise _PatchFailed(f"doc is missing path: /{'/'.join(tokens)}")
    return document


def _remove(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _PatchFailed("cannot remove the whole document")
    container, last = _resolve(document, tokens)
    if isinstance(container, dict) and last in container:
        return container.pop(last)
    if isinstance(container, list) and last.isdigit() and int(last) < len(container):
        return container.pop(int(last))
    raise _PatchFailed(f"remove operation does not apply: doc is missing path: /{'/'.join(tokens)}")


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test; JSON pointers with ~0 / ~1 escapes."""
    if not isinstance(operations, list):
        raise ApiError.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    document = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation:
            raise _PatchFailed(f"unexpected kind of operation: {operation!r}")
        op = operation["op"]
        tokens = _pointer(operation.get("path"))
        if op == "add":
            document = _add(document, tokens, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            _remove(document, tokens)
        elif op == "replace":
            _get(document, tokens)
            if tokens:
                container, last = _resolve(document, tokens)
                container[int(last) if isinstance(container, list) else last] = copy.deepcopy(operation.get("value"))
            else:
                document = copy.deepcopy(operation.get("value"))
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from"))
            value = _remove(document, source) if op == "move" else copy.deepcopy(_get(document, source))
            document = _add(document, tokens, value)
        elif op == "test":
            if _get(document, tokens) != operation.get("value"):
                raise _PatchFailed("testing value /" + "/".join(tokens) + " failed: test failed")
        else:
            raise _PatchFailed(f"Unexpected kind: {op}")
    return document


# --------------------------------------------------------------------------------------------------------------
# Recording, faults and authorization rules
# --------------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordedRequest:
    """One request the fake received, as tests assert on it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON when the body is JSON, else the text, else None
    content_type: str = ""
    resource: str | None = None  # plural of the addressed resource, when the path names one
    namespace: str | None = None
    name: str | None = None
    status: int | None = None  # the answer's status code; 200 for a watch stream once it started


_RECORD: Final = web.RequestKey("fake_kube_record", RecordedRequest)


@dataclass(frozen=True, slots=True)
class RecordedPatch:
    """A PATCH request, for tests about annotation writers."""

    resource: str
    namespace: str | None
    name: str
    content_type: str
    body: Any
    status: int | None


@dataclass(slots=True)
class Fault:
    """An injected failure; `hits` counts the requests it answered."""

    pattern: re.Pattern[str]
    status: int
    times: int | None
    method: str | None
    message: str | None
    retry_after: int
    hits: int = 0

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.pattern.search(path) is not None


@dataclass(slots=True)
class Delay:
    """An injected slow answer."""

    pattern: re.Pattern[str]
    seconds: float
    times: int | None
    method: str | None
    hits: int = 0

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.pattern.search(path) is not None


@dataclass(frozen=True, slots=True)
class AccessRule:
    """An RBAC-like grant; None matches anything. `groups` matches when the subject has any of them."""

    user: str | None = None
    groups: frozenset[str] | None = None
    verb: str | None = None
    group: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path: str | None = None  # for nonResourceAttributes
    reason: str = ""

    def matches(self, spec: JSON) -> bool:
        if self.user is not None and spec.get("user") != self.user:
            return False
        if self.groups is not None and not self.groups.intersection(spec.get("groups") or ()):
            return False
        attributes = spec.get("resourceAttributes")
        if attributes is None:
            attributes = spec.get("nonResourceAttributes") or {}
            if self.group is not None or self.resource is not None or self.namespace is not None:
                return False
            return _wild(self.verb, attributes.get("verb")) and _wild(self.path, attributes.get("path"))
        if self.path is not None:
            return False
        return (
            _wild(self.verb, attributes.get("verb"))
            and _wild(self.group, attributes.get("group", ""))
            and _wild(self.resource, attributes.get("resource"))
            and _wild(self.namespace, attributes.get("namespace", ""))
            and _wild(self.name, attributes.get("name", ""))
        )


def _wild(expected: str | None, actual: Any) -> bool:
    return expected is None or expected == "*" or expected == (actual or "")


Authorizer = Callable[[JSON], bool | tuple[bool, str]]

# --------------------------------------------------------------------------------------------------------------
# Watches
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Event:
    resource_version: int
    rtype: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    obj: JSON  # rendered, with kind and apiVersion
    old: JSON | None


class _End:
    """Queue sentinel: finish the stream (`abort`: drop the connection like a dying server)."""

    def __init__(self, abort: bool) -> None:
        self.abort = abort


@dataclass(eq=False)
class _Watcher:
    rtype: ResourceType
    namespace: str | None
    labels: list[_Requirement]
    fields: list[tuple[tuple[str, ...], bool, str]]
    bookmarks: bool
    queue: asyncio.Queue[JSON | _End] = field(default_factory=asyncio.Queue)

    def matches(self, obj: JSON) -> bool:
        metadata = obj.get("metadata") or {}
        if self.namespace is not None and metadata.get("namespace") != self.namespace:
            return False
        labels = metadata.get("labels") or {}
        if not all(requirement.matches(labels) for requirement in self.labels):
            return False
        return all((_field_value(obj, path) == value) != negate for path, negate, value in self.fields)

    def translate(self, event: _Event) -> JSON | None:
        """What this watcher sees of a change: selectors turn edges into ADDED / DELETED."""
        if event.type == "ADDED":
            return {"type": "ADDED", "object": event.obj} if self.matches(event.obj) else None
        if event.type == "DELETED":
            return {"type": "DELETED", "object": event.obj} if self.matches(event.obj) else None
        was = event.old is not None and self.matches(event.old)
        now = self.matches(event.obj)
        if was and now:
            return {"type": "MODIFIED", "object": event.obj}
        if was:
            return {"type": "DELETED", "object": event.obj}
        if now:
            return {"type": "ADDED", "object": event.obj}
        return None


def _truthy(value: str | None) -> bool:
    """The apiserver's query bool conversion: anything but "", "0" and "false" (any case) is true."""
    return value is not None and value.lower() not in ("", "0", "false")


def _rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _timestamp(value: float | datetime | None, default: float) -> float:
    if value is None:
        return default
    return value.timestamp() if isinstance(value, datetime) else float(value)


# --------------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------------

_RUNTIME_SERVICE_LABEL: Final = "modelmesh-service"
_POD_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


class FakeKubeApi:
    """A fake kube-apiserver on 127.0.0.1. Use as `async with FakeKubeApi() as kube:` and point clients at
    `kube.url` (or at `kube.write_kubeconfig(path)`).

    State lives in memory and is changed either through the HTTP API, by the code under test, or through the
    test controls below; both emit the same watch events. All controls are synchronous and must be called from
    the event loop the server runs on.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        git_version: str = "v1.31.0",
        require_token: str | None = None,
        tls: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host
        self.tls = tls
        """Serve https with a certificate from a throwaway CA (`ca_pem`). kubectl (client-go) sends credentials
        only over TLS, so a test that checks kubectl's token needs it; the Python clients send tokens either way."""
        self.ca_pem: bytes | None = None
        self._ssl: ssl.SSLContext | None = None
        self._port = port
        self.git_version = git_version
        self.require_token = require_token
        """When set, requests must carry `Authorization: Bearer <it>` (or a token in `tokens`), else 401."""
        self.clock = clock
        self.requests: list[RecordedRequest] = []
        self.tokens: dict[str, tuple[str, list[str]]] = {}
        """TokenReview answers: token -> (username, groups)."""
        self.token_reviews: list[JSON] = []
        self.access_reviews: list[JSON] = []
        """The `spec` of every SubjectAccessReview received, in order."""
        self.access_rules: list[AccessRule] = []
        self.authorizer: Authorizer | None = None
        """When set, decides SubjectAccessReviews instead of `access_rules`: spec -> allowed or (allowed, reason)."""
        self.faults: list[Fault] = []
        self.delays: list[Delay] = []
        self._objects: dict[ResourceType, dict[tuple[str, str], JSON]] = {t: {} for t in RESOURCE_TYPES}
        self._resource_version = _FIRST_RESOURCE_VERSION
        self._history: list[_Event] = []
        self._compacted = _FIRST_RESOURCE_VERSION
        self._watchers: set[_Watcher] = set()
        self._runner: web.AppRunner | None = None
        self._ip_counter = itertools.count(10)
        self._name_counter = itertools.count(1)
        self.set_authentication_config()

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKubeApi:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Listen on `host:port` (port 0 picks a free one, kept for `resume()`)."""
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        if self.tls and self._ssl is None:
            self._ssl = self._make_tls()
        site = web.TCPSite(runner, self.host, self._port, ssl_context=self._ssl)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]

    async def close(self) -> None:
        """Finish every watch stream cleanly and stop listening."""
        self.end_watches()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def pause(self) -> None:
        """An outage: drop every open connection (watches see the connection die) and refuse new ones."""
        self.end_watches(abort=True)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def resume(self) -> None:
        """Come back on the same port after `pause()`, with the same state."""
        await self.start()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self._port}"

    def write_kubeconfig(self, path: str | Path, token: str = "test-token", namespace: str = "default") -> Path:
        """A kubeconfig pointing at this server with a bearer token, for the Python clients and kubectl.

        Over plain http kubectl sends no credentials at all (client-go reads the user's auth only for TLS
        transports); start the fake with `tls=True` when kubectl's token matters."""
        target = Path(path)
        cluster: JSON = {"server": self.url}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake-user", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake-user", "namespace": namespace}}],
            "current-context": "fake",
            "preferences": {},
        }
        target.write_text(yaml.safe_dump(document, sort_keys=False))
        return target

    def _make_tls(self) -> ssl.SSLContext:
        import trustme  # a test dependency; imported only when TLS is asked for

        authority = trustme.CA()
        certificate = authority.issue_cert(self.host, "localhost")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        certificate.configure_cert(context)
        self.ca_pem = authority.cert_pem.bytes()
        return context

    # ---- test controls: faults ---------------------------------------------------------------------------------

    def fail(
        self,
        path_regex: str,
        status: int = 500,
        times: int | None = 1,
        method: str | None = None,
        message: str | None = None,
        retry_after: int = 1,
    ) -> Fault:
        """Answer the next `times` matching requests (None: until `clear_faults()`) with a Status of `status`.

        `path_regex` is searched in the path (no query). 429 answers carry `Retry-After: retry_after` and
        `details.retryAfterSeconds`, as the server's max-in-flight filter writes them.
        """
        fault = Fault(re.compile(path_regex), status, times, method.upper() if method else None, message, retry_after)
        self.faults.append(fault)
        return fault

    def delay(self, path_regex: str, seconds: float, times: int | None = None, method: str | None = None) -> Delay:
        """Hold matching requests for `seconds` before answering (None `times`: until `clear_faults()`)."""
        entry = Delay(re.compile(path_regex), seconds, times, method.upper() if method else None)
        self.delays.append(entry)
        return entry

    def clear_faults(self) -> None:
        self.faults.clear()
        self.delays.clear()

    def clear_requests(self) -> None:
        self.requests.clear()

    @property
    def patches(self) -> list[RecordedPatch]:
        """Every PATCH received, in order."""
        return [
            RecordedPatch(r.resource or "", r.namespace, r.name or "", r.content_type, r.body, r.status)
            for r in self.requests
            if r.method == "PATCH"
        ]

    # ---- test controls: watches ----------------------------------------------------------------------------

    def end_watches(self, abort: bool = False) -> None:
        """End every open watch stream now: cleanly (like `timeoutSeconds`) or by dropping the connection."""
        for watcher in self._watchers:
            watcher.queue.put_nowait(_End(abort))
        self._watchers.clear()

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets a 410 Expired ERROR."""
        self._history.clear()
        self._compacted = self._resource_version

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to every watcher that allowed bookmarks."""
        for watcher in self._watchers:
            if watcher.bookmarks:
                obj = {
                    "kind": watcher.rtype.kind,
                    "apiVersion": watcher.rtype.api_version,
                    "metadata": {"resourceVersion": str(self._resource_version), "creationTimestamp": None},
                }
                watcher.queue.put_nowait({"type": "BOOKMARK", "object": obj})

    def watch_count(self, resource: str | None = None) -> int:
        """Open watch streams, optionally of one resource (plural)."""
        return sum(1 for w in self._watchers if resource is None or w.rtype.plural == resource)

    async def wait_for_watches(self, count: int, resource: str | None = None, timeout: float = 5.0) -> None:
        """Wait until at least `count` watches are open: the ready signal for a client's watch loop."""
        async with asyncio.timeout(timeout):
            while self.watch_count(resource) < count:
                await asyncio.sleep(0.01)

    @property
    def resource_version(self) -> str:
        return str(self._resource_version)

    # ---- test controls: objects ------------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> JSON | None:
        """A copy of a stored object as a GET would return it, or None."""
        rtype = self._rtype(resource)
        obj = self._objects[rtype].get((namespace, name))
        return None if obj is None else self._render(rtype, obj)

    def objects(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Copies of the stored objects of one resource (plural, kind or short name), in key order."""
        rtype = self._rtype(resource)
        return [
            self._render(rtype, obj)
            for (ns, _), obj in sorted(self._objects[rtype].items())
            if namespace is None or ns == namespace
        ]

    def put_object(self, resource: str, obj: JSON) -> JSON:
        """Store any object as given (create or replace), with server-set metadata, emitting the event."""
        rtype = self._rtype(resource)
        metadata = obj.setdefault("metadata", {})
        key = (metadata.get("namespace", "") if rtype.namespaced else "", metadata["name"])
        if rtype.namespaced:
            metadata["namespace"] = key[0]
        old = self._objects[rtype].get(key)
        if old is None:
            return self._create(rtype, obj)
        return self._replace(rtype, key, old, obj)

    def update_object(self, resource: str, namespace: str, name: str, mutate: Callable[[JSON], None]) -> JSON:
        """Change a stored object in place through `mutate`; emits MODIFIED unless nothing changed."""
        rtype = self._rtype(resource)
        key = (namespace, name)
        old = self._objects[rtype].get(key)
        if old is None:
            raise KeyError(f"{rtype.qualified} {namespace}/{name}")
        new = copy.deepcopy(old)
        mutate(new)
        return self._replace(rtype, key, old, new)

    def delete_object(self, resource: str, namespace: str, name: str) -> JSON:
        rtype = self._rtype(resource)
        return self._delete(rtype, (namespace, name))

    def add_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int = 1,
        labels: Mapping[str, str] | None = None,
        selector: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> JSON:
        """An apps/v1 Deployment; `selector` (matchLabels) defaults to `{"app": name}`, `labels` to the selector.

        Its `status` is computed from the pods its selector matches whenever it is read.
        """
        match_labels = dict(selector) if selector is not None else {"app": name}
        obj: JSON = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "generation": 1,
                "labels": dict(labels) if labels is not None else dict(match_labels),
                "annotations": {"deployment.kubernetes.io/revision": "1", **(annotations or {})},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": match_labels},
                "template": {
                    "metadata": {"creationTimestamp": None, "labels": dict(match_labels)},
                    "spec": {"containers": [{"name": "main", "image": "registry.example/fake:latest"}]},
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
        }
        return self._create(DEPLOYMENTS, obj)

    def set_replicas(self, namespace: str, name: str, replicas: int) -> JSON:
        def change(obj: JSON) -> None:
            obj["spec"]["replicas"] = replicas

        return self.update_object("deployments", namespace, name, change)

    def set_deployment_annotations(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> JSON:
        """Merge annotations into a Deployment (None removes one)."""

        def change(obj: JSON) -> None:
            merged = merge_patch(obj["metadata"].get("annotations") or {}, dict(annotations))
            obj["metadata"]["annotations"] = merged

        return self.update_object("deployments", namespace, name, change)

    def delete_deployment(self, namespace: str, name: str) -> JSON:
        return self._delete(DEPLOYMENTS, (namespace, name))

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str] | None = None,
        ip: str | None = None,
        ready: bool = True,
        created: float | datetime | None = None,
        annotations: Mapping[str, str] | None = None,
        phase: str = "Running",
        node: str = "node-1",
    ) -> JSON:
        """A pod as the kubelet reports it. A Running pod with no `ip` gets the next 10.244.0.x; a Pending one
        has no IP. `created` is a Unix time or datetime (default: now)."""
        now = self.clock()
        created_at = _timestamp(created, now)
        if ip is None and phase == "Running":
            number = next(self._ip_counter)
            ip = f"10.244.{number // 250}.{number % 250 + 2}"
        status: JSON = {"phase": phase, "hostIP": "192.168.0.10", "startTime": _rfc3339(created_at)}
        if ip:
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        obj: JSON = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": {
                "containers": [{"name": "main", "image": "registry.example/fake:latest"}],
                "nodeName": node,
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
            },
            "status": status,
        }
        _set_pod_ready(obj, ready and phase == "Running", created_at)
        return self._create(PODS, obj, created_at=created_at)

    def set_ready(self, namespace: str, name: str, ready: bool) -> JSON:
        """Flip the pod's Ready and ContainersReady conditions (a readiness probe passing or failing)."""
        now = self.clock()
        return self.update_object("pods", namespace, name, lambda obj: _set_pod_ready(obj, ready, now))

    def set_pod_ip(self, namespace: str, name: str, ip: str | None) -> JSON:
        def change(obj: JSON) -> None:
            if ip:
                obj["status"]["podIP"] = ip
                obj["status"]["podIPs"] = [{"ip": ip}]
            else:
                obj["status"].pop("podIP", None)
                obj["status"].pop("podIPs", None)

        return self.update_object("pods", namespace, name, change)

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> JSON:
        def change(obj: JSON) -> None:
            obj["status"]["phase"] = phase
            if phase in ("Succeeded", "Failed"):
                _set_pod_ready(obj, False, self.clock())

        return self.update_object("pods", namespace, name, change)

    def delete_pod(self, namespace: str, name: str, graceful: bool = False) -> JSON:
        """Remove a pod (DELETED event). `graceful`: only mark it terminating (deletionTimestamp set, MODIFIED),
        as the API does while the kubelet stops it; a second call removes it."""
        key = (namespace, name)
        existing = self._objects[PODS].get(key)
        if existing is None:
            raise KeyError(f"pods {namespace}/{name}")
        if graceful and "deletionTimestamp" not in existing["metadata"]:
            moment = self.clock() + 30

            def terminate(obj: JSON) -> None:
                obj["metadata"]["deletionTimestamp"] = _rfc3339(moment)
                obj["metadata"]["deletionGracePeriodSeconds"] = 30

            return self.update_object("pods", namespace, name, terminate)
        return self._delete(PODS, key)

    def add_modelmesh_runtime(
        self,
        namespace: str,
        deployment: str,
        replicas: int = 2,
        ready_pods: int | None = None,
        annotations: Mapping[str, str] | None = None,
        service: str = "modelmesh-serving",
    ) -> list[str]:
        """A ModelMesh runtime as modelmesh-controller lays it out: a Deployment selecting
        `modelmesh-service=<service>, name=<deployment>` and `replicas` pods, the first `ready_pods` Ready.
        Returns the pod names (ReplicaSet-style `<deployment>-<hash>-<suffix>`)."""
        selector = {_RUNTIME_SERVICE_LABEL: service, "name": deployment}
        labels = {**selector, "app.kubernetes.io/managed-by": "modelmesh-controller"}
        self.add_deployment(namespace, deployment, replicas, labels=labels, selector=selector, annotations=annotations)
        ready = replicas if ready_pods is None else ready_pods
        names = []
        for index in range(replicas):
            pod_name = f"{deployment}-5d9c8b7f6-{self._suffix()}"
            self.add_pod(
                namespace,
                pod_name,
                labels={**selector, "pod-template-hash": "5d9c8b7f6"},
                ready=index < ready,
            )
            names.append(pod_name)
        return names

    def pod_annotations(self, namespace: str, name: str) -> dict[str, str]:
        pod = self._objects[PODS].get((namespace, name))
        if pod is None:
            raise KeyError(f"pods {namespace}/{name}")
        return dict(pod["metadata"].get("annotations") or {})

    # ---- test controls: authentication and authorization ---------------------------------------------------

    def set_authentication_config(
        self,
        *,
        client_ca: str | None = None,
        requestheader_client_ca: str | None = None,
        allowed_names: Sequence[str] = ("front-proxy-client",),
        username_headers: Sequence[str] = ("X-Remote-User",),
        group_headers: Sequence[str] = ("X-Remote-Group",),
        extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",),
        uid_headers: Sequence[str] | None = None,
    ) -> JSON:
        """Write `kube-system/extension-apiserver-authentication` as kube-apiserver does: PEM bundles under
        `client-ca-file` / `requestheader-client-ca-file` (absent when not configured) and JSON-list strings for
        the rest. `requestheader-uid-headers` exists only on servers started with that flag (1.32+)."""
        data: dict[str, str] = {}
        if client_ca is not None:
            data["client-ca-file"] = client_ca
        if requestheader_client_ca is not None:
            data["requestheader-client-ca-file"] = requestheader_client_ca
        data["requestheader-allowed-names"] = json.dumps(list(allowed_names))
        data["requestheader-extra-headers-prefix"] = json.dumps(list(extra_headers_prefix))
        data["requestheader-group-headers"] = json.dumps(list(group_headers))
        data["requestheader-username-headers"] = json.dumps(list(username_headers))
        if uid_headers is not None:
            data["requestheader-uid-headers"] = json.dumps(list(uid_headers))
        namespace, name = AUTH_CONFIGMAP
        return self.put_object("configmaps", {"metadata": {"name": name, "namespace": namespace}, "data": data})

    def allow(
        self,
        *,
        user: str | None = None,
        groups: Iterable[str] | None = None,
        verb: str | None = None,
        group: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        path: str | None = None,
        reason: str = "",
    ) -> AccessRule:
        """Grant what matches (None or "*" matches anything). With no rule and no `authorizer`, every
        SubjectAccessReview is denied, as RBAC denies by default."""
        rule = AccessRule(
            user,
            frozenset(groups) if groups is not None else None,
            verb,
            group,
            resource,
            namespace,
            name,
            path,
            reason,
        )
        self.access_rules.append(rule)
        return rule

    # ---- internals: store -----------------------------------------------------------------------------------

    @staticmethod
    def _rtype(resource: str) -> ResourceType:
        for rtype in RESOURCE_TYPES:
            if resource in (rtype.plural, rtype.qualified, rtype.singular, *rtype.short_names):
                return rtype
        raise KeyError(resource)

    def _suffix(self) -> str:
        number = next(self._name_counter) * 7919
        letters = []
        for _ in range(5):
            number, index = divmod(number, len(_POD_SUFFIX_ALPHABET))
            letters.append(_POD_SUFFIX_ALPHABET[index])
        return "".join(letters)

    def _bump(self) -> str:
        self._resource_version += 1
        return str(self._resource_version)

    def _render(self, rtype: ResourceType, obj: JSON, typed: bool = True) -> JSON:
        """The object as the server serializes it: typed (kind, apiVersion) unless it is a list item."""
        rendered: JSON = {"kind": rtype.kind, "apiVersion": rtype.api_version} if typed else {}
        body = copy.deepcopy(obj)
        metadata = body.get("metadata", {})
        for key in ("labels", "annotations"):
            if key in metadata and not metadata[key]:
                del metadata[key]
        if rtype is DEPLOYMENTS:
            body["status"] = self._deployment_status(body)
        rendered.update(body)
        return rendered

    def _deployment_status(self, deployment: JSON) -> JSON:
        namespace = deployment["metadata"]["namespace"]
        match_labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        pods = [
            pod
            for (ns, _), pod in self._objects[PODS].items()
            if ns == namespace
            and match_labels
            and all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in match_labels.items())
            and "deletionTimestamp" not in pod["metadata"]
        ]
        ready = sum(1 for pod in pods if _pod_ready(pod))
        status: JSON = {"observedGeneration": deployment["metadata"].get("generation", 1)}
        counts = {
            "replicas": len(pods),
            "updatedReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(0, deployment["spec"].get("replicas", 1) - ready),
        }
        status.update({key: value for key, value in counts.items() if value})
        return status

    def _create(self, rtype: ResourceType, obj: JSON, created_at: float | None = None) -> JSON:
        metadata = obj.setdefault("metadata", {})
        namespace = metadata.get("namespace", "") if rtype.namespaced else ""
        key = (namespace, metadata["name"])
        if key in self._objects[rtype]:
            raise ApiError.already_exists(rtype, metadata["name"])
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = _rfc3339(created_at if created_at is not None else self.clock())
        metadata["resourceVersion"] = self._bump()
        metadata.pop("deletionTimestamp", None)
        if rtype is DEPLOYMENTS:
            metadata["generation"] = 1
        stored = copy.deepcopy(obj)
        self._objects[rtype][key] = stored
        self._emit(rtype, "ADDED", stored, None)
        return self._render(rtype, stored)

    def _replace(self, rtype: ResourceType, key: tuple[str, str], old: JSON, new: JSON) -> JSON:
        """Store `new` over `old` keeping server-owned metadata; no write (and no event) when nothing changed."""
        new = copy.deepcopy(new)
        metadata = new.setdefault("metadata", {})
        for owned in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if owned in old["metadata"]:
                metadata[owned] = old["metadata"][owned]
        metadata["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _normalized(new) == _normalized(old):
            return self._render(rtype, old)
        if rtype is DEPLOYMENTS and new.get("spec") != old.get("spec"):
            metadata["generation"] = old["metadata"].get("generation", 1) + 1
        metadata["resourceVersion"] = self._bump()
        self._objects[rtype][key] = new
        self._emit(rtype, "MODIFIED", new, old)
        return self._render(rtype, new)

    def _delete(self, rtype: ResourceType, key: tuple[str, str]) -> JSON:
        old = self._objects[rtype].pop(key, None)
        if old is None:
            raise ApiError.not_found(rtype, key[1])
        final = copy.deepcopy(old)
        final["metadata"]["resourceVersion"] = self._bump()
        self._emit(rtype, "DELETED", final, old)
        return self._render(rtype, final)

    def _emit(self, rtype: ResourceType, event_type: str, obj: JSON, old: JSON | None) -> None:
        event = _Event(
            int(obj["metadata"]["resourceVersion"]),
            rtype,
            event_type,
            self._render(rtype, obj),
            self._render(rtype, old) if old is not None else None,
        )
        self._history.append(event)
        if len(self._history) > _HISTORY_LIMIT:
            dropped = self._history.pop(0)
            self._compacted = dropped.resource_version
        for watcher in self._watchers:
            if watcher.rtype is rtype and (line := watcher.translate(event)) is not None:
                watcher.queue.put_nowait(line)

    # ---- internals: HTTP ------------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        raw = await request.read()
        content_type = request.content_type if raw else ""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        parsed = _parse_path(request.path)
        record = RecordedRequest(
            method=request.method,
            path=request.path,
            query={key: value for key, value in request.query.items()},
            headers={key: value for key, value in request.headers.items()},
            body=body,
            content_type=content_type,
            resource=parsed[0].plural if parsed else None,
            namespace=parsed[1] if parsed else None,
            name=parsed[2] if parsed else None,
        )
        self.requests.append(record)
        request[_RECORD] = record
        try:
            for entry in self.delays:
                if entry.applies(request.method, request.path):
                    entry.hits += 1
                    await asyncio.sleep(entry.seconds)
                    break
            for fault in self.faults:
                if fault.applies(request.method, request.path):
                    fault.hits += 1
                    raise self._fault_error(fault)
            self._authenticate(request)
            response: web.StreamResponse = await handler(request)
        except ApiError as error:
            response = _json_response(error.status(), status=error.code, headers=error.headers)
        record.status = response.status
        return response

    @staticmethod
    def _fault_error(fault: Fault) -> ApiError:
        message = fault.message or _DEFAULT_MESSAGES.get(fault.status, f"injected failure ({fault.status})")
        if fault.status == 429:
            return ApiError(
                429,
                message,
                "TooManyRequests",
                {"retryAfterSeconds": fault.retry_after},
                {"Retry-After": str(fault.retry_after)},
            )
        details: JSON | None = None
        if fault.status == 500:
            details = {"causes": [{"message": "injected failure"}]}
        return ApiError(fault.status, message, _REASONS.get(fault.status, "Unknown"), details)

    def _authenticate(self, request: web.Request) -> None:
        if self.require_token is None:
            return
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
        if token is None or (token != self.require_token and token not in self.tokens):
            raise ApiError(401, "Unauthorized", "Unauthorized")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        discovery = self._discovery(path)
        if discovery is not None:
            if request.method != "GET":
                raise _method_not_allowed()
            return _json_response(discovery)
        parsed = _parse_path(path)
        if parsed is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        rtype, namespace, name, subresource = parsed
        if subresource is not None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if rtype is SUBJECT_ACCESS_REVIEWS and name is None and request.method == "POST":
            return self._subject_access_review(await _json_body(request))
        if rtype is TOKEN_REVIEWS and name is None and request.method == "POST":
            return self._token_review(await _json_body(request))
        if not rtype.stored or (
            rtype.namespaced and namespace is None and (name is not None or request.method != "GET")
        ):
            raise _method_not_allowed()
        if not rtype.namespaced and namespace is not None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        ns = namespace or ""
        if name is None:
            if request.method == "GET":
                if _truthy(request.query.get("watch")):
                    return await self._watch(request, rtype, namespace)
                return _json_response(self._list(rtype, namespace, request))
            if request.method == "POST":
                return _json_response(self._post(rtype, ns, await _json_body(request)), status=201)
            raise _method_not_allowed()
        key = (ns, name)
        if request.method == "GET":
            obj = self._objects[rtype].get(key)
            if obj is None:
                raise ApiError.not_found(rtype, name)
            return _json_response(self._render(rtype, obj))
        if request.method == "PUT":
            result, created = self._put(rtype, key, await _json_body(request))
            return _json_response(result, status=201 if created else 200)
        if request.method == "PATCH":
            return _json_response(self._patch(rtype, key, request.content_type, await request.read()))
        if request.method == "DELETE":
            return _json_response(self._delete(rtype, key))
        raise _method_not_allowed()

    def _list(self, rtype: ResourceType, namespace: str | None, request: web.Request) -> JSON:
        watcher = _Watcher(
            rtype,
            namespace,
            parse_label_selector(request.query.get("labelSelector")),
            parse_field_selector(request.query.get("fieldSelector")),
            bookmarks=False,
        )
        items = [
            self._render(rtype, obj, typed=False)
            for _, obj in sorted(self._objects[rtype].items())
            if watcher.matches(obj)
        ]
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": str(self._resource_version)},
            "items": items,
        }

    async def _watch(self, request: web.Request, rtype: ResourceType, namespace: str | None) -> web.StreamResponse:
        watcher = _Watcher(
            rtype,
            namespace,
            parse_label_selector(request.query.get("labelSelector")),
            parse_field_selector(request.query.get("fieldSelector")),
            bookmarks=_truthy(request.query.get("allowWatchBookmarks")),
        )
        timeout_text = request.query.get("timeoutSeconds")
        timeout = float(timeout_text) if timeout_text else None
        version_text = request.query.get("resourceVersion", "")
        # Everything up to registering the watcher runs without awaiting, so no event can fall in between.
        initial: list[JSON] = []
        expired = False
        if version_text in ("", "0"):
            initial = [
                {"type": "ADDED", "object": self._render(rtype, obj)}
                for _, obj in sorted(self._objects[rtype].items())
                if watcher.matches(obj)
            ]
        else:
            try:
                since = int(version_text)
            except ValueError:
                raise ApiError.bad_request(f'invalid resource version "{version_text}"') from None
            if since < self._compacted:
                expired = True
                message = f"too old resource version: {since} ({self._compacted})"
                initial = [{"type": "ERROR", "object": status_object(410, message, "Expired")}]
            else:
                initial = [
                    line
                    for event in self._history
                    if event.rtype is rtype
                    and event.resource_version > since
                    and (line := watcher.translate(event)) is not None
                ]
        if not expired:
            self._watchers.add(watcher)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            request[_RECORD].status = response.status
            for line in initial:
                await response.write(json.dumps(line).encode() + b"\n")
            if expired:
                await response.write_eof()
                return response
            async with asyncio.timeout(timeout):
                while True:
                    item = await watcher.queue.get()
                    if isinstance(item, _End):
                        if item.abort and request.transport is not None:
                            request.transport.abort()
                            return response
                        break
                    await response.write(json.dumps(item).encode() + b"\n")
        except TimeoutError:
            pass
        except ConnectionError:
            return response
        finally:
            self._watchers.discard(watcher)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    def _post(self, rtype: ResourceType, namespace: str, body: Any) -> JSON:
        obj = _checked_object(rtype, body)
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

    def _put(self, rtype: ResourceType, key: tuple[str, str], body: Any) -> tuple[JSON, bool]:
        obj = _checked_object(rtype, body)
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
        if rtype.status_subresource:
            if "status" in existing:
                obj["status"] = copy.deepcopy(existing["status"])
            else:
                obj.pop("status", None)
        self._validate(rtype, obj, existing)
        return self._replace(rtype, key, existing, obj), False

    def _patch(self, rtype: ResourceType, key: tuple[str, str], content_type: str, raw: bytes) -> JSON:
        if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(_PATCH_TYPES),
                "UnsupportedMediaType",
            )
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
            except _PatchFailed as error:
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
        if rtype.status_subresource:
            if "status" in existing:
                patched["status"] = copy.deepcopy(existing["status"])
            else:
                patched.pop("status", None)
        self._validate(rtype, patched, existing)
        return self._replace(rtype, key, existing, patched)

    def _validate(self, rtype: ResourceType, obj: JSON, old: JSON | None) -> None:
        """The few validations tests should trip over: string-valued labels and annotations, deletion cost."""
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
            cost = (metadata.get("annotations") or {}).get(POD_DELETION_COST)
            previous = ((old or {}).get("metadata") or {}).get("annotations") or {}
            if cost is not None and not _is_int32(cost) and _is_int32(previous.get(POD_DELETION_COST, "0")):
                raise ApiError.invalid(
                    "Pod",
                    "",
                    metadata.get("name", ""),
                    [(f"metadata.annotations[{POD_DELETION_COST}]", cost, "must be a 32bit integer")],
                )

    def _subject_access_review(self, body: Any) -> web.Response:
        review = _checked_object(SUBJECT_ACCESS_REVIEWS, body)
        spec = review.get("spec") or {}
        causes: list[tuple[str, Any, str]] = []
        has_resource = spec.get("resourceAttributes") is not None
        has_non_resource = spec.get("nonResourceAttributes") is not None
        if has_resource and has_non_resource:
            causes.append(
                (
                    "spec.nonResourceAttributes",
                    "set",
                    "cannot be specified in combination with resourceAttributes",
                )
            )
        if not has_resource and not has_non_resource:
            causes.append(
                (
                    "spec.resourceAttributes",
                    None,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if not spec.get("user") and not spec.get("groups"):
            causes.append(("spec.user", "", "at least one of user or group must be specified"))
        if causes:
            raise ApiError.invalid("SubjectAccessReview", "authorization.k8s.io", "", causes)
        self.access_reviews.append(copy.deepcopy(spec))
        allowed, reason = self._decide(spec)
        status: JSON = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        answer = {
            "kind": "SubjectAccessReview",
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return _json_response(answer, status=201)

    def _decide(self, spec: JSON) -> tuple[bool, str]:
        if self.authorizer is not None:
            decision = self.authorizer(spec)
            return decision if isinstance(decision, tuple) else (bool(decision), "")
        for index, rule in enumerate(self.access_rules):
            if rule.matches(spec):
                subject = f'User "{spec["user"]}"' if spec.get("user") else f'Group "{(spec.get("groups") or [""])[0]}"'
                reason = rule.reason or (
                    f'RBAC: allowed by ClusterRoleBinding "fake-rule-{index}" of ClusterRole "fake-rule-{index}" '
                    f"to {subject}"
                )
                return True, reason
        return False, ""

    def _token_review(self, body: Any) -> web.Response:
        review = _checked_object(TOKEN_REVIEWS, body)
        spec = review.get("spec") or {}
        self.token_reviews.append(copy.deepcopy(spec))
        identity = self.tokens.get(spec.get("token") or "")
        status: JSON
        if identity is None:
            status = {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        else:
            username, groups = identity
            all_groups = list(groups) + ([] if "system:authenticated" in groups else ["system:authenticated"])
            status = {
                "authenticated": True,
                "user": {
                    "username": username,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, username)),
                    "groups": all_groups,
                },
            }
            if spec.get("audiences"):
                status["audiences"] = list(spec["audiences"])
        answer = {
            "kind": "TokenReview",
            "apiVersion": TOKEN_REVIEWS.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return _json_response(answer, status=201)

    def _discovery(self, path: str) -> JSON | None:
        if path == "/version":
            match = re.match(r"v(\d+)\.(\d+)", self.git_version)
            major, minor = (match.group(1), match.group(2)) if match else ("1", "31")
            return {
                "major": major,
                "minor": minor,
                "gitVersion": self.git_version,
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2024-08-13T07:28:49Z",
                "goVersion": "go1.22.5",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self._port}"}
                ],
            }
        groups = sorted({t.group for t in RESOURCE_TYPES if t.group})
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g) for g in groups]}
        if path.startswith("/apis/") and path.count("/") == 2 and path.split("/")[2] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(path.split("/")[2])}
        for group_version in {t.api_version for t in RESOURCE_TYPES}:
            prefix = "/api/" if "/" not in group_version else "/apis/"
            if path == prefix + group_version:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": [_api_resource(t) for t in RESOURCE_TYPES if t.api_version == group_version],
                }
        return None

    # ---- process mode ---------------------------------------------------------------------------------------

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Load deployments, pods, tokens and access rules from a mapping (the `--state` YAML file)."""
        for item in state.get("deployments") or []:
            self.add_deployment(
                item.get("namespace", "default"),
                item["name"],
                int(item.get("replicas", 1)),
                labels=item.get("labels"),
                selector=item.get("selector"),
                annotations=item.get("annotations"),
            )
        for item in state.get("runtimes") or []:
            self.add_modelmesh_runtime(
                item.get("namespace", "default"),
                item["deployment"],
                int(item.get("replicas", 2)),
                ready_pods=item.get("ready_pods"),
                annotations=item.get("annotations"),
            )
        for item in state.get("pods") or []:
            self.add_pod(
                item.get("namespace", "default"),
                item["name"],
                labels=item.get("labels"),
                ip=item.get("ip"),
                ready=bool(item.get("ready", True)),
                created=item.get("created"),
                annotations=item.get("annotations"),
            )
        for token, identity in (state.get("tokens") or {}).items():
            self.tokens[token] = (identity["user"], list(identity.get("groups") or []))
        for rule in state.get("allow") or []:
            self.allow(**rule)
        if state.get("require_token"):
            self.require_token = str(state["require_token"])


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


def _pod_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _set_pod_ready(pod: JSON, ready: bool, moment: float) -> None:
    """Set Ready / ContainersReady the way the kubelet reports them, moving lastTransitionTime on change."""
    status = pod.setdefault("status", {})
    conditions: list[JSON] = status.setdefault("conditions", [])
    if not conditions:
        created = pod.get("metadata", {}).get("creationTimestamp") or _rfc3339(moment)
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            conditions.append({"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": created})
    value = "True" if ready else "False"
    for condition in conditions:
        if condition["type"] in ("Ready", "ContainersReady") and condition["status"] != value:
            condition["status"] = value
            condition["lastTransitionTime"] = _rfc3339(moment)
            if ready:
                condition.pop("reason", None)
            else:
                condition["reason"] = "ContainersNotReady"
    status["containerStatuses"] = [
        {
            "name": container["name"],
            "ready": ready,
            "started": True,
            "restartCount": 0,
            "image": container.get("image", ""),
            "imageID": "",
            "containerID": "containerd://" + "0" * 64,
            "state": {"running": {"startedAt": status.get("startTime", _rfc3339(moment))}},
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]


def _is_int32(value: Any) -> bool:
    if not isinstance(value, str) or not re.fullmatch(r"[+-]?\d+", value):
        return False
    return -(2**31) <= int(value) <= 2**31 - 1


def _normalized(obj: JSON) -> JSON:
    """The object without its resourceVersion and empty maps, to detect no-op writes."""
    clone = copy.deepcopy(obj)
    metadata = clone.get("metadata", {})
    metadata.pop("resourceVersion", None)
    for key in ("labels", "annotations"):
        if key in metadata and not metadata[key]:
            del metadata[key]
    return clone


def _checked_object(rtype: ResourceType, body: Any) -> JSON:
    if not isinstance(body, dict):
        raise ApiError.bad_request(f"the body of the request is not a {rtype.kind} object")
    kind = body.get("kind")
    if kind is not None and kind != rtype.kind:
        raise ApiError.bad_request(f"the kind of the object ({kind}) does not match the resource ({rtype.kind})")
    obj = copy.deepcopy(body)
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else None
    except ValueError as error:
        raise ApiError.bad_request(f"couldn't get version/kind; json parse error: {error}") from None


def _json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """JSON as the API server sends it: `Content-Type: application/json`, no charset parameter."""
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers, content_type="application/json")


def _method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")


def _parse_path(path: str) -> tuple[ResourceType, str | None, str | None, str | None] | None:
    """(type, namespace, name, subresource) for a resource path, or None."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    rtype = _BY_PATH.get((group, version, rest[0]))
    if rtype is None:
        return None
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    return rtype, namespace, name, subresource


def _api_group(group: str) -> JSON:
    version = next(t.version for t in RESOURCE_TYPES if t.group == group)
    entry = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [entry], "preferredVersion": entry}


def _api_resource(rtype: ResourceType) -> JSON:
    resource: JSON = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        resource["shortNames"] = list(rtype.short_names)
    if rtype in (PODS, DEPLOYMENTS):
        resource["categories"] = ["all"]
    return resource


async def _serve(args: argparse.Namespace) -> None:
    kube = FakeKubeApi(args.host, args.port)
    if args.state:
        kube.load_state(yaml.safe_load(Path(args.state).read_text()) or {})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with kube:
        if args.kubeconfig:
            kube.write_kubeconfig(args.kubeconfig, token=args.token)
        print(f"fake kube-apiserver listening on {kube.url}", flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m tests.fakes.kube_api --port N --state FILE.yaml [--kubeconfig OUT]`: serve until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", help="YAML with deployments, runtimes, pods, tokens, allow, require_token")
    parser.add_argument("--kubeconfig", help="write a kubeconfig pointing at the server here")
    parser.add_argument("--token", default="test-token", help="bearer token written into --kubeconfig")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
