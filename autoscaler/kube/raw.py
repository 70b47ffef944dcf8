"""Raw JSON calls to the Kubernetes API: one decoded answer, or a `KubeApiError`.

Discovery calls the `kubernetes.aio` methods `*_without_preload_content` and reads the body as raw JSON
rather than the generated pydantic models: a watch is a stream the models cannot express, a list of 10,000
pods is far cheaper to read as dicts, and a field a newer server adds can never fail validation here.

Errors: every failure of the library or the API surfaces as `KubeApiError` (`autoscaler.kube.errors`, the
library exception chained as `__cause__`) with the HTTP status and the Status `reason`; `WatchExpiredError`
is the 410 that means "list again".
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp

from autoscaler.backend_said import told
from autoscaler.kube.errors import KubeApiError, WatchExpiredError

JSON = dict[str, Any]

Scope = str | None
"""Where one list or watch looks: a namespace, or None for all namespaces."""

CACHED: Final = "0"
"""A list's `resourceVersion` for "any version": the API server answers from its watch cache, as it answers an
informer's list, where a list without one is a consistent read, from etcd before Kubernetes 1.31. For lists
repeated at every resync whose objects a write of ours does not depend on, and no read by name must overtake (the
cache may be older than a read just before it, by milliseconds or, with etcd under load, seconds)."""

Endpoint = Callable[..., Awaitable[aiohttp.ClientResponse]]
"""A generated `list_*_without_preload_content` method bound to its resource and scope: with the list options
it lists; with `watch=True` it opens a watch stream (`autoscaler.kube.list_watch`)."""


async def read_json(call: Callable[[], Awaitable[aiohttp.ClientResponse]], what: str) -> JSON:
    """Make a raw API call and decode its JSON body; every failure becomes a `KubeApiError`.

    The call is made inside the guard: the generated methods validate their arguments when called."""
    try:
        response = await call()
    except Exception as error:
        raise KubeApiError(f"{what}: {describe(error)}") from error
    try:
        body = await read_body(response, what)
    finally:
        response.release()
    if response.status >= 300:
        raise status_error(what, response.status, body, response.headers.get("Retry-After"))
    if not isinstance(body, dict):
        raise KubeApiError(f"{what}: the answer is not a JSON object")
    return body


async def open_stream(call: Callable[[], Awaitable[aiohttp.ClientResponse]], what: str) -> aiohttp.ClientResponse:
    """Open a streaming call (a watch): the response, its status checked, for the caller to read and release.

    A refused or failed request is a `KubeApiError`; a 410 status is a `WatchExpiredError`."""
    try:
        response = await call()
    except Exception as error:
        raise KubeApiError(f"{what}: {describe(error)}") from error
    if response.status >= 300:
        try:
            raise status_error(what, response.status, await read_body(response, what),
                               response.headers.get("Retry-After"))
        finally:
            response.release()
    return response


async def read_body(response: aiohttp.ClientResponse, what: str) -> Any:
    """The decoded body; an error answer that is not JSON comes back as its text, for the error message."""
    try:
        raw = await response.read()
    except Exception as error:
        raise KubeApiError(f"{what}: reading the answer failed: {describe(error)}") from error
    try:
        return json.loads(raw) if raw else None
    except ValueError as error:
        if response.status >= 300:
            return raw.decode("utf-8", "replace")
        raise KubeApiError(f"{what}: the answer is not JSON") from error


def status_error(what: str, code: int, body: Any, retry_after: str | None = None) -> KubeApiError:
    """The error for a failed answer, from its Status object when there is one. The server's wait before a
    retry (429 from API Priority and Fairness or max-in-flight, some 5xx) comes from the `Retry-After` header,
    else from the Status's `details.retryAfterSeconds` (all a watch's ERROR event carries)."""
    reason = ""
    message = ""
    if isinstance(body, dict):
        reason = told(str(body.get("reason") or ""))
        message = told(str(body.get("message") or ""))  # any length, any characters: the log and /debug say it
        code = int(body.get("code") or code)
    elif isinstance(body, str):
        message = told(body.strip())
    text = f"{what}: {code} {reason}: {message}".rstrip(": ")
    if code == 410:
        return WatchExpiredError(text, code, reason)
    return KubeApiError(text, code, reason, retry_wait(body, retry_after))


def retry_wait(body: Any, retry_after: str | None) -> float | None:
    """The server's wait before a retry: the `Retry-After` header in seconds, else the Status's
    `details.retryAfterSeconds`; None when it gave none (or an HTTP date, which the API server never sends)."""
    if retry_after is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(retry_after))
    details = body.get("details") if isinstance(body, dict) else None
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return float(seconds)
    return None


def describe(error: BaseException) -> str:
    """An exception as one line: its type, and its message when it has one."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def scope_name(scope: Scope) -> str:
    """A scope as log and error messages say it."""
    return f"namespace {scope}" if scope is not None else "all namespaces"


def object_key(obj: JSON, scope: Scope = None) -> tuple[str, str]:
    """(namespace, name) from an object's metadata, each "" where missing: the key of objects held by name. A
    namespace left out of an item falls back to `scope` (the namespace it was listed or watched in)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or scope or ""), str(meta.get("name") or "")
