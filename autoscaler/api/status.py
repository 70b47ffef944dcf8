"""Kubernetes `Status` error bodies: the only error shape the API ever returns.

The HPA, kubectl and the aggregator all expect `metav1.Status` for non-2xx answers. The reason is always one of
the `StatusReason` constants of `k8s.io/apimachinery/pkg/apis/meta/v1` (kubectl prints it, `Error from server
(REASON): ...`, and client-go's `IsBadRequest`, `IsNotFound`... test it), chosen as apimachinery's
`NewGenericServerResponse` chooses it for a code: a code metav1 has no reason for leaves the reason out
(`StatusReasonUnknown`, the empty string, omitted) when it is a 4xx, and is `InternalError` when it is a 5xx.
431 (request line or headers too large) is `BadRequest`: the request as sent can never succeed.
"""

from __future__ import annotations

import json
from typing import Any, Final

from aiohttp import hdrs, web
from multidict import CIMultiDict, istr

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    431: "BadRequest",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for(code: int) -> str:
    """The `StatusReason` of a code; "" (StatusReasonUnknown) for a 4xx metav1 has none for."""
    return REASONS.get(code, "InternalError" if code >= 500 else "")


def status_body(code: int, message: str, retry_after_s: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason_for(code),
        "code": code,
    }
    if not body["reason"]:
        del body["reason"]  # `omitempty`, as kube writes StatusReasonUnknown
    if retry_after_s is not None:
        body["details"] = {"retryAfterSeconds": retry_after_s}
    return body


NOSNIFF: Final = istr("X-Content-Type-Options")

KUBE_HEADERS: Final = CIMultiDict({hdrs.CACHE_CONTROL: "no-cache, private", NOSNIFF: "nosniff"})
"""What kube-apiserver marks every answer with: `Cache-Control: no-cache, private` (its `WithCacheControl`
filter: an answer is for this client, now, never for a shared cache) and `X-Content-Type-Options: nosniff`
(its response writers and health checks: a browser must not read a JSON or text answer as HTML)."""


class ApiResponse(web.Response):
    """Every answer of the API: kube-apiserver's headers (`KUBE_HEADERS`, unless the handler set its own) and no
    `Server` header (aiohttp's names Python's and its own versions, what a scanner wants to know; Go's server,
    kube-apiserver's, sends none). aiohttp adds its `Server` in `_prepare_headers`, after the handler, so it is
    taken out there: one step of the response itself, where the `on_response_prepare` signal would be two
    coroutines more on every request. `app.Serving` turns any other `web.Response` a handler returns into one
    (`as_api_response`)."""

    async def _prepare_headers(self) -> None:
        headers = self._headers
        if hdrs.CACHE_CONTROL not in headers:  # as `WithCacheControl`: a handler's own value stands
            headers.extend(KUBE_HEADERS)
        await _prepare_headers(self)  # aiohttp's, without building a `super()` on every request
        del headers[hdrs.SERVER]


_prepare_headers: Final = web.StreamResponse._prepare_headers


def as_api_response(response: web.Response) -> ApiResponse:
    """`response` as an `ApiResponse`: the same status, headers, body and compression (a handler that builds a
    `web.Response` of its own: `/openapi/v2`, prometheus_client's `/metrics` page)."""
    answer = ApiResponse(body=response.body, status=response.status, reason=response.reason,
                         headers=response.headers)
    if response.compression:
        answer.enable_compression()
    return answer


_JSON_HEADERS: Final = CIMultiDict({hdrs.CONTENT_TYPE: "application/json; charset=utf-8"})


def json_answer(body: bytes, status: int = 200, headers: CIMultiDict[str] | None = None) -> ApiResponse:
    """An `ApiResponse` of JSON (`body`, encoded), as `web.json_response` writes its headers."""
    return ApiResponse(body=body, status=status, headers=_JSON_HEADERS if headers is None else headers)


def status_response(code: int, message: str, headers: dict[str, str] | None = None,
                    retry_after_s: int | None = None) -> ApiResponse:
    """The Status; with `retry_after_s` also the `Retry-After` header, as kube-apiserver writes both: client-go
    (the HPA's client, kubectl) then waits that long and retries by itself instead of failing the call."""
    all_headers = CIMultiDict(_JSON_HEADERS)
    all_headers.update(headers or {})
    if retry_after_s is not None:
        all_headers["Retry-After"] = str(retry_after_s)
    return json_answer(json.dumps(status_body(code, message, retry_after_s)).encode(), code, all_headers)


class ApiError(Exception):
    """Raised by handlers to answer with a `Status`; the middleware renders it."""

    def __init__(self, code: int, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
