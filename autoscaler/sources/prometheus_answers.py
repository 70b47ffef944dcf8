"""What answered instead of Prometheus's query API, said so that an operator knows which flag to fix.

Between the adapter and Prometheus sit what clusters really run: an OAuth proxy that redirects to its sign-in
page, kube-rbac-proxy that answers 403, a Mimir or Cortex gateway that wants a tenant header, a route prefix the
URL lacks. prometheus-api-client reports all of them as `HTTP Status Code 401 (b'<the whole body>')` or as a
`JSONDecodeError`, which names neither what answered nor what to change, and quotes an HTML page of any size
in every outage line. `check_answer` is a requests response hook (the library takes the session, so the hook sees
every response before the library does): it turns those answers into a `PrometheusSourceError` whose detail
says the status, the path asked, a short summary of the body, and the flag that fixes that kind of answer.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, Final

import requests

from autoscaler.backend_said import quoted, told
from autoscaler.sources.body_summary import body_summary
from autoscaler.sources.tls_causes import HOST_MISMATCH, NOT_TLS, ssl_cause
from exporter import names

# Reasons counted in `PrometheusSource.errors` (the first five are whole-refresh failures, spelled as the scrape
# source and the exporter spell them: `exporter.names`).
REASON_CONNECT: Final = names.REASON_CONNECT  # refused, reset, DNS: nothing answered; or the request not sent
REASON_TIMEOUT: Final = names.REASON_TIMEOUT  # no answer in timeout_s, Prometheus's "timeout" error, a slow refresh
REASON_TLS: Final = names.REASON_TLS  # the certificate did not verify
REASON_HTTP: Final = names.REASON_HTTP  # an HTTP error status (bad query, not ready, proxy 5xx, refused credentials)
REASON_PARSE: Final = names.REASON_PARSE  # the body is not the query API's JSON
REASON_EMPTY: Final = "empty"  # Ready pods exist but Prometheus has no series for any of them

CREDENTIALS_HINT: Final = (
    "the backend refused the request's credentials: give a token it accepts (--prometheus-token-file), a tenant "
    "header (--prometheus-headers X-Scope-OrgID=TENANT for Grafana Mimir or Cortex) or user:password in "
    "--prometheus-url"
)
NOT_FOUND_HINT: Final = (
    "no Prometheus query API at that path: --prometheus-url is the base URL, with the route prefix Prometheus "
    "serves under if it has one (http://host:9090/prometheus) and without /api/v1"
)
URI_TOO_LONG_HINT: Final = (
    "the query URL is too long for a proxy or gateway in front of Prometheus (the adapter sends each query as a "
    "GET): every namespace of --namespaces and each matcher of --prometheus-series-selector is written into every "
    "selector of it; raise the proxy's limit on request lines (nginx: large_client_header_buffers), or name "
    "fewer namespaces"
)
TLS_HINT: Final = (
    "give the CA that signs Prometheus's certificate: --prometheus-ca-file (the service CA for Thanos Querier on "
    "OpenShift)"
)
PLAIN_HTTP_HINT: Final = (
    "nothing speaks TLS at that address (Prometheus serves plain http unless given a web config): use http:// in "
    "--prometheus-url"
)
HOST_MISMATCH_HINT: Final = (
    "the certificate chains to a trusted CA but does not name the host in --prometheus-url: use a host name it "
    "is issued for (usually the Service's DNS name, e.g. thanos-querier.openshift-monitoring.svc), not an IP "
    "address or another Service's name"
)

TIMEOUT_DOCS: Final = "docs/operations.md#4-optional-prometheus-and-dashboards"
"""Where the docs say what a slow Prometheus needs (cores, a longer timeout), as the timeout lines name it."""


def timeout_hint(timeout_s: float) -> str:
    """What a read timeout's line adds to urllib3's words (`Read timed out. (read timeout=5.0)`), which name no
    setting, where a 401's names --prometheus-token-file: the flag whose limit it met, and what to change."""
    return (f"no answer within --prometheus-timeout {timeout_s:g} s: give Prometheus cores (PromQL evaluates each "
            f"query on one core), or raise --prometheus-timeout ({TIMEOUT_DOCS})")


LOGIN_HINT: Final = (
    "a login proxy in front of Prometheus? Give it a token (--prometheus-token-file), or check --prometheus-url"
)


class PrometheusSourceError(Exception):
    """Prometheus could not be read for this refresh; `reason` is one of the REASON_* values.

    `kind` tells failures of one reason apart where the log should say the change (an HTTP 503, then a 500;
    Prometheus's errorType): the reason itself unless given. Not the detail, which may differ at every refresh
    for one cause (a connection's object address, a count of connections cut)."""

    def __init__(self, reason: str, detail: str, kind: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.kind = kind or reason


def shown(url: str) -> str:
    """A URL for logs: without its query string (the URL-encoded PromQL, or a proxy's `rd=` copy of it) and
    with any password in it as `***`."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@{netloc.rpartition('@')[2]}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def api_error(text: str) -> tuple[str, str] | None:
    """The query API's own (errorType, error) in an error answer's body; None in any other body."""
    try:
        payload: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        kind = payload.get("errorType")
        return (kind if isinstance(kind, str) else "", payload["error"])
    return None


def summary(text: str, content_type: str = "") -> str:
    """A body in a few words: the query API's own error, else what any body is said as (`body_summary`: an HTML
    page's title, or its start)."""
    error = api_error(text.strip())
    if error is not None:
        return told(f"{error[0]}: {error[1]}" if error[0] else error[1])
    return body_summary(text, content_type)


def check_answer(
    response: requests.Response,
    *args: Any,
    query_url: str,
    on_warnings: Callable[[Sequence[str]], None] | None = None,
    **kwargs: Any,
) -> requests.Response:
    """Pass a redirect or a 200 that is not a web page on; raise PrometheusSourceError for anything else.

    `query_url` is the URL asked (`.../api/v1/query`), to tell where a redirect led. A 200 that says it is
    partial (`partial_warnings`) is passed on, and what it says goes to `on_warnings`. Bound with
    `functools.partial`, this is a requests `response` hook (requests passes the send options as keywords),
    run in the query's worker thread.
    """
    if response.is_redirect:
        return response
    if response.status_code == 200 and "html" not in _content_type(response):
        refused = error_in_success(response.content)
        if refused is not None:
            response.close()
            raise _api_refused(refused, f"{shown(query_url)} answered 200 with")
        warnings = partial_warnings(response.content)
        if warnings and on_warnings is not None:
            on_warnings(warnings)
        return response
    try:
        text = response.text  # read whole, so that the connection goes back to the pool
    finally:
        response.close()
    asked, answered = shown(query_url), shown(response.url)
    # where it was sent is a proxy's words (a Location of any length): told as any backend's are
    where = asked if answered == asked else f"{asked} (redirected to {told(answered)})"
    said = summary(text, _content_type(response))
    if response.status_code == 200:
        raise PrometheusSourceError(REASON_PARSE, f"{where} answered {said}, not Prometheus's JSON: {LOGIN_HINT}",
                                    "HTTP 200 html")
    hint = {401: CREDENTIALS_HINT, 403: CREDENTIALS_HINT, 404: NOT_FOUND_HINT, 414: URI_TOO_LONG_HINT}.get(
        response.status_code)
    error = api_error(text)
    raise PrometheusSourceError(
        _reason_of(error), f"HTTP {response.status_code} from {where}: {said}" + (f"; {hint}" if hint else ""),
        f"HTTP {response.status_code} {error[0] if error else ''}")


def _reason_of(error: tuple[str, str] | None) -> str:
    """Told our timeout (`timeout=`), Prometheus gives up first and says so (errorType `timeout`): the same outage
    as ours timing out. Any other error answer is `http`."""
    return REASON_TIMEOUT if error is not None and error[0] == "timeout" else REASON_HTTP


_ERROR_BODY_BYTES: Final = 65536
"""The largest 200 answer read for an error: the query API's error answers are a few hundred bytes, its data up
to megabytes (parsed by the library, once)."""


def error_in_success(body: bytes) -> tuple[str, str] | None:
    """The query API's own (errorType, error) in a 200 answer that says `"status":"error"`, as some gateways and
    proxies answer a failed query (a query timed out, a storage node down). Read, it was lost: the library looked
    for `data`, and the log said `KeyError('data')`. Parsed only when short and naming an `"error"`."""
    if len(body) > _ERROR_BODY_BYTES or b'"error"' not in body:
        return None
    return api_error(body.decode("utf-8", "replace"))


def _api_refused(error: tuple[str, str], where: str) -> PrometheusSourceError:
    kind, message = error
    said = f"errorType {quoted(kind)}, error {quoted(message)}" if kind else f"error {quoted(message)}"
    return PrometheusSourceError(_reason_of(error), f"{where} Prometheus's own error: {said}", f"HTTP 200 {kind}")


def partial_warnings(body: bytes) -> list[str]:
    """What a 200 answer says about itself: the query API's `warnings` (Thanos Query lists the stores it could
    not reach there, answering without their series) and VictoriaMetrics cluster's `isPartial`. The body is
    parsed here only when it holds either key (a megabyte at 10,000 pods; the library parses it again)."""
    if b'"warnings"' not in body and b'"isPartial"' not in body:
        return []
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return []  # the library's parse says so
    if not isinstance(payload, dict):
        return []
    raw = payload.get("warnings")
    said = [told(str(warning)) for warning in raw] if isinstance(raw, list) else []
    if payload.get("isPartial") is True and not said:
        said.append("isPartial: some storage nodes did not answer")
    return said


_SSL_REASON: Final = re.compile(r"\[SSL[^\]]*\] (.+?)(?: \(_ssl\.c:\d+\))?['\"]\)")


def tls_failed(url: str, error: requests.exceptions.SSLError) -> PrometheusSourceError:
    """A TLS failure said as OpenSSL says it, without urllib3's retry wrapping, with the hint that fits it: a
    certificate no given CA signs (--prometheus-ca-file), a certificate for another host (the URL's host), or no
    TLS at all at that address (http://)."""
    cause = ssl_cause(error)
    if isinstance(cause, ssl.SSLCertVerificationError) and cause.verify_message:
        said = f"certificate verify failed: {cause.verify_message.rstrip('.')}"
        hint = HOST_MISMATCH_HINT if cause.verify_code in HOST_MISMATCH else TLS_HINT
    else:
        found = _SSL_REASON.search(str(error))
        said = found[1] if found else repr(error)
        hint = PLAIN_HTTP_HINT if cause is not None and cause.reason in NOT_TLS else TLS_HINT
    return PrometheusSourceError(REASON_TLS, f"{shown(url)}: {said}; {hint}")


def not_json(url: str, error: requests.exceptions.JSONDecodeError) -> PrometheusSourceError:
    """A 200 whose body the library could not read as JSON (and that did not say it was HTML)."""
    return PrometheusSourceError(
        REASON_PARSE, f"{shown(url)} answered {summary(error.doc)}, not Prometheus's JSON: {LOGIN_HINT}")


def not_sent(url: str, error: OSError, ca_file: str | None) -> PrometheusSourceError:
    """An OSError that is none of requests' own: the request was never sent, so nothing answered (`connect`), and
    no answer is to blame. requests raises one for a `ca_file` (`--prometheus-ca-file`) that is not there at the
    time of a request (a mounted Secret being swapped, a path edited after the check at start): that is `tls`, as
    a certificate that does not verify is, and says the flag and the file."""
    if ca_file is not None and not os.path.exists(ca_file):
        return PrometheusSourceError(
            REASON_TLS, f"{shown(url)}: no CA bundle at {ca_file} (--prometheus-ca-file), which is read at every new "
            "connection: mount it there again, or set --prometheus-ca-file to the path it has now", "ca file")
    return PrometheusSourceError(REASON_CONNECT, f"{shown(url)}: the request could not be sent: {error!r}",
                                 "not sent")


def _content_type(response: requests.Response) -> str:
    return str(response.headers.get("Content-Type", ""))
