"""Fetching one exporter's `/metrics`, with every cost bounded, and naming why a fetch failed.

The bounds exist because any pod that matches a runtime's selector gets scraped: a short connect timeout (a
black-holed pod costs one second, not the whole per-pod timeout), the per-pod total timeout, and a cap on
the bytes read (one pod answering 64 MiB bodies took the adapter past its 512 MiB memory limit). A body
over the cap is abandoned and its connection closed as soon as the cap is passed, never buffered.

Failure reasons are the exporter's own (`exporter.names.REASON_*`: a TLS failure is `tls` on both sides),
plus `too_large`. The detail (logged, and shown in /debug for the pod) says the failure as OpenSSL or HTTP says
it, and what to change where the failure names it: a CA to trust, a certificate out of its dates, plain http
(either way round), a refusing proxy, a wrong port (the one scraped named), no sidecar listening, packets
dropped or a sidecar hung (a timeout).
"""

from __future__ import annotations

import errno
import ssl
from typing import Final

import aiohttp
from yarl import URL

from autoscaler.backend_said import quoted, told
from autoscaler.sources.modelmesh_own_port import plain_to_tls_port
from autoscaler.sources.tls_causes import HOST_MISMATCH, NOT_TLS, ssl_cause
from exporter import names
from exporter.refused_handshakes import GO_SAYS

MAX_BODY_BYTES = 1 << 20
"""1 MiB: the exporter's whole output with 8 GPUs is about 5 KB; anything near the cap is not our exporter."""
CONNECT_TIMEOUT_S = 1.0
"""Inside a cluster a TCP connect takes well under a millisecond; a pod that has not answered the SYN
within a second is gone (its node lost), and waiting longer only stretches the refresh."""
REASON_TOO_LARGE = "too_large"
_CHUNK_BYTES = 64 * 1024

CA_HINT: Final = ("the exporter's certificate is not signed by a CA the adapter trusts: give the CA that signs it "
                  "with --exporter-ca-file")
HOST_HINT: Final = ("the certificate chains to a trusted CA but does not name the address scraped (the pod's IP): "
                    "give --exporter-server-name a DNS name the exporters' certificates carry (as Prometheus's "
                    "tls_config server_name), or issue them with the pod's IP as a subject alternative name")
SERVER_NAME_HINT: Final = ("the certificate chains to a trusted CA but does not carry --exporter-server-name {name}: "
                           "give the name the exporters' certificates carry (their dnsNames)")
PLAIN_HINT: Final = ("nothing speaks TLS there (the exporter serves plain http unless given --tls-cert-file): give "
                     "the exporter its certificate; where it was given one, the sidecar is older than 5 December 2026 "
                     "and ignores EXPORTER_TLS_* (its log says 'EXPORTER_TLS_CERT_FILE is not a setting; ignored'): "
                     "set this release's image in the same edit as the TLS patch, or before it; or scrape it over "
                     "http: a discovered pod is scraped over https "
                     "because its exporter port is named https or https-... (https-exporter, the TLS patch's; "
                     "--exporter-scheme auto) or --exporter-scheme https forces it: name the port exporter until the "
                     "sidecar serves TLS, or give --exporter-scheme http; in a targets file, write http://")
REFUSED_HINT: Final = ("the exporter, or a proxy in front of it (kube-rbac-proxy), refuses the adapter: an exporter "
                       "given --tls-client-ca-file wants a client certificate of that CA (--exporter-client-cert-file "
                       "and --exporter-client-key-file); a proxy, let the adapter through, or point the adapter at the "
                       "exporter's own port")
CLIENT_CERTIFICATE_REFUSED: Final = frozenset({"TLSV13_ALERT_CERTIFICATE_REQUIRED", "TLSV1_ALERT_UNKNOWN_CA",
                                              "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_CERTIFICATE_UNKNOWN"})
"""OpenSSL's reasons when the exporter refused the adapter's client certificate in a TLS 1.2 handshake (or
sent its alert before the adapter's first read)."""
CLOSED_HINT: Final = ("an exporter given --tls-client-ca-file closes the connection on a client certificate its CA did "
                      "not sign: give the adapter one it signs with "
                      "--exporter-client-cert-file and --exporter-client-key-file")
EXPIRED_HINT: Final = ("cert-manager renews a certificate well before it expires, so an exporter serving an expired "
                       "one did not pick up its renewal: look in the sidecar's log for 'does not load' reload "
                       "warnings, and check that the exporters' Secret was renewed (kubectl get certificate)")
NOT_YET_VALID_HINT: Final = ("the certificate's validity starts after the adapter's clock: the clock of the node that "
                             "issued it (cert-manager's) or of the adapter's node is off; check their time sync (NTP)")
_DATE_HINTS: Final = {10: EXPIRED_HINT, 9: NOT_YET_VALID_HINT}
"""X509_V_ERR_CERT_HAS_EXPIRED and X509_V_ERR_CERT_NOT_YET_VALID: a trusted certificate out of its dates, where
another CA would not help."""
PLAIN_TO_TLS_HINT: Final = ("an exporter serving HTTPS (given --tls-cert-file) refuses plain HTTP so (answering 400 "
                            f"'{GO_SAYS}', or closing the connection, as older exporters do): "
                            "name its port https-exporter, as manifests/examples/exporter-tls does, for "
                            "--exporter-scheme auto (the default) to scrape it over https, or force "
                            "--exporter-scheme https; trust its CA with --exporter-ca-file")
WENT_AWAY_HINT: Final = ("it answered over plain http before, so the scheme is not the cause: the pod or its exporter "
                         "sidecar went away (the pod deleted, the sidecar restarting or OOM-killed; kubectl describe "
                         "pod says which)")


def not_found_hint(url: str) -> str:
    """A 404: ModelMesh's own port, or another server's, rather than the exporter's. The port named is the one
    scraped (`--exporter-port`, or a targets file's URL), not the default: an adapter given another port was
    told to check 9187."""
    return f"no /metrics at that address: is port {_port(url)} the exporter's (--exporter-port), not ModelMesh's own?"


def connect_hint(url: str) -> str:
    """A refused connection: no sidecar there, or not on the port scraped, or a policy that refuses."""
    return (f"nothing accepts connections there: is the exporter sidecar in the pod and listening on port "
            f"{_port(url)} (the adapter's --exporter-port, default 9187), and does a NetworkPolicy let the adapter "
            "reach it?")


def timeout_hint(url: str) -> str:
    """No answer in time. A NetworkPolicy that drops the adapter's packets shows as this, not as a refusal (so
    does one applied while a connection kept from before is open), and so does a hung sidecar: a stopped
    process's socket still takes connections, the kernel answering for it, and never answers."""
    return (f"a NetworkPolicy that drops the adapter's packets to port {_port(url)} (rather than refusing them), "
            "a hung exporter sidecar (stopped, or throttled to no CPU) or a lost node shows as this: check the "
            "NetworkPolicies selecting the pod and the sidecar (kubectl describe pod, its log)")


def _port(url: str) -> int | str:
    try:
        port = URL(url).port
    except ValueError:
        port = None
    return "--exporter-port" if port is None else port


_HTTP_HINTS: Final = {401: REFUSED_HINT, 403: REFUSED_HINT}


class FetchError(Exception):
    """One fetch failed; `reason` is the `source_errors_total` label, `str()` what the log says. `told`: what the
    runtime's /debug and 503 say instead, where the log's words name what its readers may not read (another
    namespace's pod an exporter claims: `answered_pod`); None: the same words."""

    def __init__(self, reason: str, detail: str, told: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.told = told


def scrape_timeout(total_s: float, connect_s: float = CONNECT_TIMEOUT_S) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total_s, sock_connect=min(connect_s, total_s))


async def fetch_exposition(session: aiohttp.ClientSession, url: str, *, max_bytes: int = MAX_BODY_BYTES,
                           server_name: str | None = None, answered_before: bool = False) -> str:
    """The body of `url` as text; raises `FetchError` with the reason for any failure. `server_name`: the name an
    https exporter's certificate is verified against, and sent as the TLS server name, instead of the URL's host
    (`--exporter-server-name`). `answered_before`: the pod's exporter answered a scrape before, so a connection
    it closes is the pod going away, not an HTTPS exporter refusing plain HTTP (`closed_hint`)."""
    timeout = session.timeout
    try:
        # A redirect is never followed: the exporter has none, and a tenant's pod that answered one sent the
        # adapter (its network reach, its client certificate) to any address, another tenant's exporter read as
        # its own load or an internal service whose answer came back quoted in the 503 that tenant reads.
        async with session.get(url, server_hostname=server_name, allow_redirects=False) as response:
            if 300 <= response.status < 400:
                raise FetchError(names.REASON_HTTP, f"HTTP {response.status} from {url}: {redirect_said(response)}")
            if response.status != 200:
                if response.status == 400 and GO_SAYS.encode() in await response.content.read(len(GO_SAYS)):
                    # plain HTTP to an HTTPS exporter (or any Go server): a connection refused, as it was before
                    # the exporter answered it, so the `connect` errors alerted on and the hint stay
                    raise FetchError(names.REASON_CONNECT, f"{url}: HTTP 400 '{GO_SAYS}'; {PLAIN_TO_TLS_HINT}")
                hint = (f"; {not_found_hint(url)}" if response.status == 404
                        else f"; {_HTTP_HINTS[response.status]}" if response.status in _HTTP_HINTS else "")
                raise FetchError(names.REASON_HTTP, f"HTTP {response.status} from {url}{hint}")
            body = await _read_capped(response, url, max_bytes)
    except aiohttp.ConnectionTimeoutError as error:
        raise FetchError(names.REASON_TIMEOUT, f"no connection to {url} within {timeout.sock_connect} s; "
                                                f"{timeout_hint(url)}") from error
    except TimeoutError as error:
        raise FetchError(names.REASON_TIMEOUT, f"no answer from {url} in {timeout.total} s; "
                                                f"{timeout_hint(url)}") from error
    except (aiohttp.ClientSSLError, ssl.SSLError) as error:
        raise FetchError(names.REASON_TLS, tls_detail(url, error, server_name)) from error
    except aiohttp.ClientConnectorError as error:
        # The OS's words, not aiohttp's ("Cannot connect to host ... ssl:default" read as TLS on an http:// URL)
        raise FetchError(names.REASON_CONNECT, f"{url}: {error.os_error}; {connect_hint(url)}") from error
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
        # TLS 1.3 ends the handshake before the server has judged the client's certificate: its refusal comes
        # at the first read, as the connection closed or reset, not as a TLS error.
        # An exporter that sends the alert (`exporter.refused_handshakes`) names it: the same refusal.
        cause = ssl_cause(error)
        closed = (isinstance(error, aiohttp.ServerDisconnectedError) or error.errno == errno.ECONNRESET
                  or (cause is not None and cause.reason in CLIENT_CERTIFICATE_REFUSED))
        hint = f"; {closed_hint(url, answered_before)}" if closed else ""
        raise FetchError(names.REASON_CONNECT, f"{url}: {told(str(error))}{hint}") from error
    except aiohttp.ClientPayloadError as error:
        raise FetchError(names.REASON_PARSE, f"incomplete body from {url}: {told(str(error))}") from error
    except aiohttp.ClientError as error:  # aiohttp's words may quote the answer's (a bad status line, whole)
        raise FetchError(names.REASON_CONNECT, f"{url}: {told(str(error))}") from error
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FetchError(names.REASON_PARSE, f"{url}: {error}") from error


def closed_hint(url: str, answered_before: bool) -> str:
    """What a connection closed (or reset) by the exporter means. Over https: a client certificate refused. Over
    http: an exporter serving HTTPS, but only where the pod never answered over http; one that did (scraped fine
    for minutes) went away, and the HTTPS hint sent operators to rename the ports of a fleet that worked."""
    if url.startswith("https://"):
        return CLOSED_HINT
    return WENT_AWAY_HINT if answered_before else f"{plain_to_tls_port(_port(url))} {PLAIN_TO_TLS_HINT}"


def tls_detail(url: str, error: BaseException, server_name: str | None = None) -> str:
    """A TLS failure as OpenSSL says it, with the hint that fits: a CA to trust, a certificate for another
    address (or another `--exporter-server-name`), one out of its dates (a renewal not picked up, a clock off),
    or no TLS at all at that address."""
    cause = ssl_cause(error)
    if isinstance(cause, ssl.SSLCertVerificationError) and cause.verify_message:
        hint = (_DATE_HINTS.get(cause.verify_code, CA_HINT) if cause.verify_code not in HOST_MISMATCH
                else HOST_HINT if server_name is None else SERVER_NAME_HINT.format(name=server_name))
        return f"{url}: certificate verify failed: {cause.verify_message.rstrip('.')}; {hint}"
    if cause is not None and cause.reason in NOT_TLS:
        return f"{url}: {cause.reason}; {PLAIN_HINT}"
    if cause is not None and cause.reason in CLIENT_CERTIFICATE_REFUSED:
        return f"{url}: {cause.reason}; {CLOSED_HINT}"
    return f"{url}: {error}"


def redirect_said(response: aiohttp.ClientResponse) -> str:
    """Where a redirect pointed, quoted (`backend_said`: the pod's words, a terminal escape or 8 KB of them
    included), and that it was not followed: the operator learns what sits at the pod's port."""
    location = response.headers.get(aiohttp.hdrs.LOCATION)
    where = "with no Location" if location is None else f"redirected to {quoted(location)}"
    return (f"{where}, not followed (the exporter never redirects: another server answers at the pod's port, "
            "or one that sends the adapter elsewhere)")


async def _read_capped(response: aiohttp.ClientResponse, url: str, max_bytes: int) -> bytes:
    too_large = FetchError(REASON_TOO_LARGE, f"{url} sent more than {max_bytes} bytes; not read further")
    if response.content_length is not None and response.content_length > max_bytes:
        response.close()
        raise too_large
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
        body += chunk
        if len(body) > max_bytes:
            response.close()  # never hand a half-read connection back to the pool
            raise too_large
    return bytes(body)
