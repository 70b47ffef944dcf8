"""What tests do to the fake's traffic: record every request, inject failures and slow answers, and make
something else happen in the cluster while a client is mid-way through its work.

`FaultInjection` keeps `requests` (every request with its answer's status) and the injected `faults`,
`delays`, `held_answers` and `triggers`; the server's middleware calls `_record` first and `_inject` before
authentication, so an injected failure answers even an unauthenticated request, as an overloaded real server would.
A trigger (`on_request`) runs a test's action when a matching request arrives, before it is answered: "the HPA
writes while the fifth status write is in flight" without guessing at timings; `hold_answer` keeps a request
unanswered until the test releases it: "answered after the client renewed its credential"; with `applied=True`
after the server applied it (a write stored, its watch event sent): "another writer puts its value back while the
client waits for its write's answer", a slow answer rather than a slow request. `forbid` refuses a verb
on a resource in a namespace with RBAC's own 403 message, naming the object, the user and the missing
permission, as a missing Role does: `get` refuses every read (one object, a list, a watch); `list` and `watch`
refuse only reads of a collection, or only its watches, in RBAC's words for that verb (`cannot list resource
"pods"`), as a Role granting `get` but not `list` or `watch` does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from tests.fakes.kube.resources import parse_path
from tests.fakes.kube.wire import JSON, REASONS, ApiError, truthy


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
    answered: int | None = None  # the order in which the fake produced its answers: the order writes took effect
    events: int = 0  # the lines a watch stream has sent so far (ERROR and BOOKMARK events too)


RECORD: Final = web.RequestKey("fake_kube_record", RecordedRequest)
"""Where a request carries its own record, so a handler can fill in the status early (watch streams)."""


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
    retry_after: int | None
    hits: int = 0

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.pattern.search(path) is not None


_VERBS: Final = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _read_verb(method: str, name: str | None, watch: bool) -> str | None:
    """The RBAC verb a GET is authorized as: `get` for one object, `list` or `watch` for a collection."""
    if method != "GET":
        return None
    if name is not None:
        return "get"
    return "watch" if watch else "list"


@dataclass(frozen=True, slots=True)
class Forbidden:
    """An RBAC denial: `verb` on `resource` (a plural) in `namespace` (None: every namespace) for `user`."""

    verb: str
    resource: str
    namespace: str | None
    user: str

    def error(self, method: str, path: str, watch: bool = False) -> ApiError | None:
        parsed = parse_path(path)
        if parsed is None:
            return None
        rtype, namespace, name, _ = parsed
        if _VERBS.get(method) != self.verb and _read_verb(method, name, watch) != self.verb:
            return None
        if rtype.plural != self.resource or (self.namespace is not None and namespace != self.namespace):
            return None
        return rbac_denial(self.user, self.verb, rtype.plural, rtype.group, namespace, name)


def rbac_denial(user: str, verb: str, resource: str, group: str, namespace: str | None, name: str | None) -> ApiError:
    """RBAC's 403 as kube-apiserver words it: the object (or collection), the user, the verb, the resource and
    its API group, and the namespace or the cluster scope."""
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    subject = f'{resource}{"." + group if group else ""} "{name}"' if name else \
        f'{resource}{"." + group if group else ""}'
    message = (f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
               f'in API group "{group}"{where}')
    return ApiError(403, message, "Forbidden", {"name": name, "group": group, "kind": resource} if name else None)


def request_denial(user: str, method: str, path: str, watch: bool) -> ApiError:
    """RBAC's 403 for `user` on any request, with the verb the server authorizes it as: a resource's
    (`get`, `list`, `watch`, `create`, ...; a subresource named after its resource, `runtimescales/scale`) or,
    for a path that is no resource (`/apis`), the HTTP method: `cannot get path "/apis"`."""
    parsed = parse_path(path)
    if parsed is None:
        return ApiError(403, f'forbidden: User "{user}" cannot {method.lower()} path "{path}"', "Forbidden")
    rtype, namespace, name, subresource = parsed
    verb = _read_verb(method, name, watch) or _VERBS.get(method, method.lower())
    resource = f"{rtype.plural}/{subresource}" if subresource else rtype.plural
    return rbac_denial(user, verb, resource, rtype.group, namespace, name)


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


@dataclass(slots=True)
class HeldAnswer:
    """Matching requests kept unanswered until `release()`; `hits` counts the requests it held. `applied`: held
    after the server applied the request (its answer withheld), not before."""

    pattern: re.Pattern[str]
    times: int | None
    method: str | None
    hits: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)
    applied: bool = False

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.pattern.search(path) is not None

    def release(self) -> None:
        """Answer the held requests (and let later matches through unheld)."""
        self.released.set()


@dataclass(slots=True)
class Trigger:
    """A test's action, run when a matching request arrives: the first `after` matches pass, the next `times`
    (None: all) run it. `hits` counts the requests it matched."""

    pattern: re.Pattern[str]
    action: Callable[[], object]
    after: int
    times: int | None
    method: str | None
    hits: int = 0

    def fire(self, method: str, path: str) -> None:
        if (self.method is not None and self.method != method) or self.pattern.search(path) is None:
            return
        self.hits += 1
        if self.hits > self.after and (self.times is None or self.hits <= self.after + self.times):
            self.action()


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


class FaultInjection:
    """Request recording and the fault/delay test controls."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[RecordedRequest] = []
        self._answers = itertools.count()
        self.faults: list[Fault] = []
        self.delays: list[Delay] = []
        self.held_answers: list[HeldAnswer] = []
        self.triggers: list[Trigger] = []
        self.forbidden: list[Forbidden] = []

    # ---- test controls ---------------------------------------------------------------------------------------

    def fail(
        self,
        path_regex: str,
        status: int = 500,
        times: int | None = 1,
        method: str | None = None,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> Fault:
        """Answer the next `times` matching requests (None: until `clear_faults()`) with a Status of `status`.

        `path_regex` is searched in the path (no query). 429 answers carry `Retry-After: retry_after` (1 unless
        given) and `details.retryAfterSeconds`, as the server's max-in-flight filter writes them. A 503 carries
        `Retry-After` only where `retry_after` is given: the answer of an API server shutting down to every new
        request (`fail(..., 503, message="apiserver is shutting down", retry_after=1)`, as its wait-group and
        watch-termination filters write it); other 503s carry none.
        """
        fault = Fault(re.compile(path_regex), status, times, method.upper() if method else None, message, retry_after)
        self.faults.append(fault)
        return fault

    def delay(self, path_regex: str, seconds: float, times: int | None = None, method: str | None = None) -> Delay:
        """Hold matching requests for `seconds` before answering (None `times`: until `clear_faults()`)."""
        entry = Delay(re.compile(path_regex), seconds, times, method.upper() if method else None)
        self.delays.append(entry)
        return entry

    def hold_answer(self, path_regex: str, times: int | None = 1, method: str | None = None, *,
                    applied: bool = False) -> HeldAnswer:
        """Keep the next `times` matching requests (None: all) unanswered until the returned `HeldAnswer.release()`
        (or `clear_faults()`); then they are authenticated and answered as any other. `applied`: authenticated
        and applied first (a write stored, its watch event sent), only the answer held until the release."""
        entry = HeldAnswer(re.compile(path_regex), times, method.upper() if method else None, applied=applied)
        self.held_answers.append(entry)
        return entry

    def on_request(self, path_regex: str, action: Callable[[], object], *, method: str | None = None, after: int = 0,
                   times: int | None = 1) -> Trigger:
        """Run `action()` (a change to the store, a client's callback) when a matching request arrives, before it
        is delayed or answered; the first `after` matches pass, then `times` of them (None: all, until
        `clear_faults()`) run it. `path_regex` is searched in the path (no query)."""
        trigger = Trigger(re.compile(path_regex), action, after, times, method.upper() if method else None)
        self.triggers.append(trigger)
        return trigger

    def forbid(self, verb: str, resource: str, namespace: str | None = None,
               user: str = "system:serviceaccount:modelmesh-autoscaler:modelmesh-autoscaler") -> Forbidden:
        """Refuse `verb` (`get`: every read; `list`, `watch`: a collection's reads, its watches; `create`, `update`,
        `patch`, `delete`) on `resource` in `namespace` (None: all)
        with RBAC's 403, until `clear_faults()`: a Role missing or lacking the verb."""
        rule = Forbidden(verb, resource, namespace, user)
        self.forbidden.append(rule)
        return rule

    def clear_faults(self) -> None:
        self.faults.clear()
        self.delays.clear()
        for held in self.held_answers:
            held.release()
        self.held_answers.clear()
        self.triggers.clear()
        self.forbidden.clear()

    def _answered(self, record: RecordedRequest, status: int) -> None:
        record.status = status
        record.answered = next(self._answers)

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

    # ---- internals: called by the server's middleware ----------------------------------------------------------

    async def _record(self, request: web.Request) -> RecordedRequest:
        """Append the request to `requests` (its status is filled in once answered) and attach it as RECORD."""
        raw = await request.read()
        content_type = request.content_type if raw else ""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        parsed = parse_path(request.path)
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
        request[RECORD] = record
        return record

    async def _inject(self, request: web.Request) -> None:
        """Run the matching triggers, hold the request for the first matching delay, then raise the first
        matching fault's error."""
        for trigger in list(self.triggers):
            trigger.fire(request.method, request.path)
        for entry in self.delays:
            if entry.applies(request.method, request.path):
                entry.hits += 1
                await asyncio.sleep(entry.seconds)
                break
        await self._hold(request, applied=False)
        for fault in self.faults:
            if fault.applies(request.method, request.path):
                fault.hits += 1
                raise _fault_error(fault)
        watch = truthy(request.query.get("watch"))
        for rule in self.forbidden:
            if (error := rule.error(request.method, request.path, watch)) is not None:
                raise error


    async def _hold(self, request: web.Request, *, applied: bool) -> None:
        """Wait for the release of the first matching held answer of its kind: before the request is applied
        (`_inject`), or after, its answer ready (the middleware, `applied=True`)."""
        for held in self.held_answers:
            if held.applied == applied and held.applies(request.method, request.path):
                held.hits += 1
                await held.released.wait()
                break


def _fault_error(fault: Fault) -> ApiError:
    message = fault.message or _DEFAULT_MESSAGES.get(fault.status, f"injected failure ({fault.status})")
    if fault.status == 429:
        retry_after = 1 if fault.retry_after is None else fault.retry_after
        return ApiError(
            429,
            message,
            "TooManyRequests",
            {"retryAfterSeconds": retry_after},
            {"Retry-After": str(retry_after)},
        )
    details: JSON | None = None
    if fault.status == 500:
        details = {"causes": [{"message": "injected failure"}]}
    headers = {"Retry-After": str(fault.retry_after)} if fault.status == 503 and fault.retry_after is not None else None
    return ApiError(fault.status, message, REASONS.get(fault.status, "Unknown"), details, headers)
