"""Learning that the API server refused a request's credential, for the renewals of an exec plugin's token
(`credentials`) and client certificate (`client_certificate`).

kubectl (client-go) runs the plugin again after a 401 Unauthorized, not only near the expiry the plugin stated:
a credential revoked or rotated early (an EKS token whose STS session ended, an OIDC session logged out, a
certificate whose CA rotated) is refused well before then. The library's REST client raises the 401 to the caller
and keeps nothing, so the renewals learn of it from aiohttp's trace of every request, which the API clients made
from a configuration carry (`configuration.trace_configs`).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from types import SimpleNamespace

import aiohttp

Refused = Callable[[aiohttp.TraceRequestEndParams, SimpleNamespace], None]
"""Told of a request answered 401, with the request's headers (the `Authorization` it carried) and response, and
the request's trace context (what the renewal noted of it: the certificate its connection presented)."""


def on_unauthorized(trace: aiohttp.TraceConfig, refused: Refused) -> None:
    """Tell `refused` of each request traced by `trace` that the API server answers 401 Unauthorized."""

    async def request_end(_session: aiohttp.ClientSession, ctx: SimpleNamespace,
                          params: aiohttp.TraceRequestEndParams) -> None:
        if params.response.status == HTTPStatus.UNAUTHORIZED:
            refused(params, ctx)

    trace.on_request_end.append(request_end)
