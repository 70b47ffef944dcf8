"""Kubernetes `Status` error bodies: the only error shape the API ever returns.

The HPA, kubectl and the aggregator all expect `metav1.Status` for non-2xx answers; reason strings follow
`k8s.io/apimachinery/pkg/apis/meta/v1` StatusReason values.
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
    429: "TooManyRequests",
    431: "RequestHeaderFieldsTooLarge",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_body(code: int, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": REASONS.get(code, "Unknown"),
        "code": code,
    }


def status_response(code: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(status_body(code, message), status=code, headers=headers)


class ApiError(Exception):
    """Raised by handlers to answer with a `Status`; the middleware renders it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
