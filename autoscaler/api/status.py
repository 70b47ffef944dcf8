"""Kubernetes `Status` error bodies: the only error shape the API ever returns.

The HPA, kubectl and the aggregator all expect `metav1.Status` for non-2xx answers. The reason is always one of
the `StatusReason` constants of `k8s.io/apimachinery/pkg/apis/meta/v1` (kubectl prints it, `Error from server
(REASON): ...`, and client-go's `IsBadRequest`, `IsNotFound`... test it), chosen as apimachinery's
`NewGenericServerResponse` chooses it for a code: a code metav1 has no reason for leaves the reason out
(`StatusReasonUnknown`, the empty string, omitted) when it is a 4xx, and is `InternalError` when it is a 5xx.
431 (request line or headers too large) is `BadRequest`: the request as sent can never succeed.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

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


def status_response(code: int, message: str, headers: dict[str, str] | None = None,
                    retry_after_s: int | None = None) -> web.Response:
    """The Status; with `retry_after_s` also the `Retry-After` header, as kube-apiserver writes both: client-go
    (the HPA's client, kubectl) then waits that long and retries by itself instead of failing the call."""
    if retry_after_s is not None:
        headers = {**(headers or {}), "Retry-After": str(retry_after_s)}
    return web.json_response(status_body(code, message, retry_after_s), status=code, headers=headers)


class ApiError(Exception):
    """Raised by handlers to answer with a `Status`; the middleware renders it."""

    def __init__(self, code: int, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
