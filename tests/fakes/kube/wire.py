"""The API server's wire format, shared by every other module of the fake.

Errors leave the fake as `Status` objects, selectors are parsed as the server parses them and timestamps are
written as RFC 3339 seconds, so what a client sees here is what it would see from kube-apiserver. Nothing in
this module holds state.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.kube.resources import ResourceType

JSON = dict[str, Any]

# --------------------------------------------------------------------------------------------------------------
# Errors as the API server writes them
# --------------------------------------------------------------------------------------------------------------

REASONS: Final = {
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
_OPTIMISTIC_LOCK: Final = "the object has been modified; please apply your changes to the latest version and try again"


def status_object(code: int, message: str, reason: str | None = None, details: JSON | None = None) -> JSON:
    """A failure `Status` exactly as the API server serializes it."""
    status: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason if reason is not None else REASONS.get(code, ""),
        "code": code,
    }
    if details:
        status["details"] = details
    return status


@dataclass(frozen=True, slots=True)
class FieldError:
    """One `field.Error` of a 422: the field, its `StatusCause` reason and the text after "field: "."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueForbidden, FieldValueNotSupported
    body: str  # "Invalid value: 3: must be ...", "Forbidden: ...", 'Unsupported value: "x": supported values: ...'

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls(field, "FieldValueForbidden", f"Forbidden: {detail}")

    @classmethod
    def not_supported(cls, field: str, value: str, supported: Sequence[str]) -> FieldError:
        values = ", ".join(json.dumps(v) for v in supported)
        return cls(field, "FieldValueNotSupported",
                   f"Unsupported value: {json.dumps(value)}: supported values: {values}")


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
        return cls.invalid_fields(kind, group, name, [
            FieldError(fld, "FieldValueInvalid", f"Invalid value: {_go_value(value)}: {detail}")
            for fld, value, detail in causes
        ])

    @classmethod
    def invalid_fields(cls, kind: str, group: str, name: str, causes: Sequence[FieldError]) -> ApiError:
        """422 as `errors.NewInvalid` builds it from `field.Error`s of any type (Invalid, Forbidden, ...)."""
        rendered = [f"{cause.field}: {cause.body}" for cause in causes]
        joined = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
        qualified = f"{kind}.{group}" if group else kind
        details: JSON = {"name": name}
        if group:
            details["group"] = group
        details["kind"] = kind
        details["causes"] = [
            {"reason": cause.reason, "message": cause.body, "field": cause.field} for cause in causes
        ]
        return cls(422, f'{qualified} "{name}" is invalid: {joined}', "Invalid", details)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, message, "BadRequest")

    @classmethod
    def no_such_path(cls) -> ApiError:
        """The 404 for a path that names no served resource (no `details`: there is no object to name)."""
        return cls(404, "the server could not find the requested resource", "NotFound")

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        return cls(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")


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
class LabelRequirement:
    """One term of a label selector."""

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


FieldRequirement = tuple[tuple[str, ...], bool, str]
"""One term of a field selector: (path into the object, negated, value)."""


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


def parse_label_selector(text: str | None) -> list[LabelRequirement]:
    """Parse equality-based (`a=b`, `a==b`, `a!=b`), existence (`a`, `!a`) and set-based requirements."""
    requirements: list[LabelRequirement] = []
    for term in _split_terms(text or ""):
        if match := _SET_REQUIREMENT.match(term):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(LabelRequirement(match.group(1), match.group(2), values))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            requirements.append(LabelRequirement(key.strip(), "!=", frozenset({value.strip()})))
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            requirements.append(LabelRequirement(key.strip(), "=", frozenset({value.strip()})))
        elif term.startswith("!"):
            requirements.append(LabelRequirement(term[1:].strip(), "!"))
        else:
            requirements.append(LabelRequirement(term, "exists"))
    for requirement in requirements:
        if not requirement.key or any(c in requirement.key for c in " ()!=,"):
            raise ApiError.bad_request(f"unable to parse requirement: found '{requirement.key}', expected: key")
    return requirements


def parse_field_selector(text: str | None, rtype: ResourceType | None = None) -> list[FieldRequirement]:
    """Equality field selectors; with `rtype`, only on the fields the server converts for that kind
    (`ResourceType.field_path`: a 400 for any other, as the real server answers)."""
    requirements: list[FieldRequirement] = []
    for term in _split_terms(text or ""):
        match = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", term)
        if match is None:
            raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        key, operator, value = match.groups()
        path = rtype.field_path(key) if rtype is not None else tuple(key.split("."))
        requirements.append((path, operator == "!=", value))
    return requirements


def field_value(obj: JSON, path: tuple[str, ...]) -> str:
    """A field as a field selector compares it: missing fields read as "", booleans as Go prints them; a
    digit indexes a list (`status.podIPs.0.ip`)."""
    node: Any = obj
    for part in path:
        if isinstance(node, list) and part.isdigit():
            node = node[int(part)] if int(part) < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


_LIST_MATCHES: Final = ("Exact", "NotOlderThan")


def check_list_options(query: Mapping[str, str], watch: bool) -> None:
    """The list and watch options kube-apiserver refuses with 422 before it reads anything
    (`ValidateListOptions` in apimachinery's meta/internalversion/validation, WatchList on as from 1.32)."""
    match = query.get("resourceVersionMatch", "")
    send_initial = query.get("sendInitialEvents")
    causes: list[FieldError] = []
    if watch:
        if send_initial is not None and match != "NotOlderThan":
            causes.append(FieldError.forbidden(
                "resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if match:
            if send_initial is None:
                causes.append(FieldError.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided"))
            if match != "NotOlderThan":
                causes.append(FieldError.not_supported("resourceVersionMatch", match, ["NotOlderThan"]))
    else:
        if match:
            if not query.get("resourceVersion"):
                causes.append(FieldError.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if query.get("continue"):
                causes.append(FieldError.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
            if match not in _LIST_MATCHES:
                causes.append(FieldError.not_supported("resourceVersionMatch", match, [*_LIST_MATCHES, ""]))
            if match == "Exact" and query.get("resourceVersion") == "0":
                causes.append(FieldError.forbidden(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if send_initial is not None:
            causes.append(FieldError.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise ApiError.invalid_fields("ListOptions", "meta.k8s.io", "", causes)


# --------------------------------------------------------------------------------------------------------------
# Query parameters, times and bodies
# --------------------------------------------------------------------------------------------------------------


def truthy(value: str | None) -> bool:
    """The apiserver's query bool conversion: anything but "", "0" and "false" (any case) is true."""
    return value is not None and value.lower() not in ("", "0", "false")


def rfc3339(moment: float) -> str:
    """A Unix time as metav1.Time serializes it: UTC, whole seconds."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def timestamp(value: float | datetime | None, default: float) -> float:
    """A Unix time from what test controls accept (Unix time, datetime or None for `default`)."""
    if value is None:
        return default
    return value.timestamp() if isinstance(value, datetime) else float(value)


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON document: what the store hands out or keeps can be changed by its holder without
    touching the other copies, as `copy.deepcopy` guarantees, at a fraction of its cost (it memoizes every node
    and dispatches per type; the store copies every object it stores, renders and fans out, which made deepcopy
    the fake's main cost in the tests that write a lot). Anything but dicts, lists and scalars is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def checked_object(rtype: ResourceType, body: Any) -> JSON:
    """A request body as the object to store: it must be a mapping of the addressed kind; kind and apiVersion
    are dropped because the store keeps objects untyped and adds them back when rendering."""
    if not isinstance(body, dict):
        raise ApiError.bad_request(f"the body of the request is not a {rtype.kind} object")
    kind = body.get("kind")
    if kind is not None and kind != rtype.kind:
        raise ApiError.bad_request(f"the kind of the object ({kind}) does not match the resource ({rtype.kind})")
    obj: JSON = json_copy(body)
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


async def json_body(request: web.Request) -> Any:
    """The request body as JSON (None when empty); undecodable JSON is the server's 400."""
    raw = await request.read()
    try:
        return json.loads(raw) if raw else None
    except ValueError as error:
        raise ApiError.bad_request(f"couldn't get version/kind; json parse error: {error}") from None


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """JSON as the API server sends it: `Content-Type: application/json`, no charset parameter."""
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers, content_type="application/json")
