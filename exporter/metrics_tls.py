"""/metrics and /healthz over HTTPS, and /metrics only to clients with a certificate, where the sidecar is told so.

Why: /metrics names the models this pod served and the pod itself; on plain HTTP anyone who reaches the port
reads it, and only an example NetworkPolicy limited that. node-exporter's web config (exporter-toolkit) is what
platform engineers expect: a serving certificate, and client certificates that chain to a CA.

/healthz with client certificates: the kubelet's HTTPS probes send no client certificate, and the kubelet does
not verify the serving one either, so a handshake that demanded a client certificate would fail every liveness
probe and restart the sidecar for good. So the certificate is *requested* (`CERT_OPTIONAL`): one the CA did not
sign is refused in the handshake, as with a required one; a client that sends none completes the handshake and
reaches /healthz (which says "ok" and nothing else), while /metrics answers it 401. One port, one Secret, and the
probes keep `scheme: HTTPS` on the port they already use, where a second plain port for /healthz would be one
more port for the NetworkPolicy and the manifests to know.
"""

from __future__ import annotations

import logging
import ssl
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from exporter.cert_reload import certificate_reload_context
from exporter.client_ca_reload import client_ca_context, client_ca_reload_context
from exporter.refusal_log import RefusalLog, Remedies
from exporter.refused_handshakes import tell_refused_clients
from exporter.settings import ExporterSettings, setting
from exporter.tls_files import server_context

CLIENT_CERTIFICATE_PATHS: Final = frozenset({"/metrics"})
"""The paths that need a client certificate when `--tls-client-ca-file` is given: /healthz stays open (above)."""

log = logging.getLogger(__name__)


def plain_http_advice() -> str:
    """The line after Go's in the `400` a plain HTTP client is answered: why HTTPS, and where to say it."""
    return (f"This port serves HTTPS only ({setting('--tls-cert-file')} is given): use https:// (Prometheus: "
            "scheme: https in the scrape config or ServiceMonitor endpoint; probes: scheme: HTTPS).")


def no_client_certificate() -> str:
    """What a client without a certificate is told by /metrics' 401, and the log."""
    return (f"/metrics needs a client certificate signed by the CA of {setting('--tls-client-ca-file')}: give "
            "Prometheus tls_config cert_file and key_file, the adapter --exporter-client-cert-file and "
            "--exporter-client-key-file")


def exporter_remedies() -> Remedies:
    """What to do about each refused handshake, in the exporter's settings' words."""
    return Remedies(
        untrusted_client=(
            f"the client's certificate is not signed by a CA in {setting('--tls-client-ca-file')}: give Prometheus "
            "(tls_config cert_file) and the adapter (--exporter-client-cert-file) a certificate that CA signed, "
            "or add their CA to the bundle"),
        plain_http=(f"the client sent plain HTTP to the HTTPS port ({setting('--tls-cert-file')} is given) and was "
                    "answered 400 Bad Request: it must use https:// (Prometheus: scheme: https; probes: scheme: "
                    "HTTPS)"),
        nothing_in_common=("the client offers no TLS version or cipher the exporter accepts (TLS 1.2 or later): "
                           "update the client or its TLS settings"),
    )


def serve_over_tls(app: web.Application, settings: ExporterSettings) -> ssl.SSLContext | None:
    """The context to serve `app` with (None: plain HTTP, no certificate given), its certificate reloaded for as
    long as `app` runs, and /metrics closed to clients without a certificate where a client CA is given, that CA
    reloaded too (`exporter.client_ca_reload`, which then reloads the certificate as well); a client refused in
    the handshake (plain HTTP, a certificate of another CA) told why (`exporter.refused_handshakes`), and every
    refused client in the log (`exporter.refusal_log`). The pair was checked when the settings were read
    (`settings._check_serving_tls`)."""
    cert_file, key_file, ca_file = settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file
    if cert_file is None or key_file is None:
        return None
    refusals = RefusalLog(log, exporter_remedies())
    if ca_file is None:
        context = server_context(cert_file, key_file)
        tell_refused_clients(context, plain_http_advice(), refusals.failed)
        app.cleanup_ctx.append(certificate_reload_context(context, cert_file, key_file))
        return context
    context = client_ca_context(cert_file, key_file, ca_file)
    tell_refused_clients(context, plain_http_advice(), refusals.failed)
    app.cleanup_ctx.append(client_ca_reload_context(context, cert_file, key_file, ca_file))
    app.middlewares.append(client_certificate_required(refusals))
    return context


def serving_said(settings: ExporterSettings) -> str:
    """How the exporter serves over HTTPS, for its log: what an operator checks when a scraper is refused."""
    said = f"HTTPS with the certificate {settings.tls_cert_file} (read again when it changes)"
    if settings.tls_client_ca_file is not None:
        said += (f"; /metrics only to client certificates signed by {settings.tls_client_ca_file} (read again "
                 "when it changes)")
    return said


def client_certificate_required(refusals: RefusalLog) -> Middleware:
    """401 for /metrics without a client certificate, said in the log (`refusals`: Prometheus's target page
    shows only the 401). A certificate that reached here was verified by the handshake (`CERT_OPTIONAL` refuses
    one the CA did not sign), so its presence is the whole check."""

    @web.middleware
    async def required(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        if request.path in CLIENT_CERTIFICATE_PATHS and not (transport and transport.get_extra_info("peercert")):
            refusals.refused(f"{request.method} {request.path} from {request.remote or 'an unknown peer'} (answered "
                             "401)", "no client certificate", no_client_certificate())
            raise web.HTTPUnauthorized(text=no_client_certificate() + "\n")
        return await handler(request)

    return required
