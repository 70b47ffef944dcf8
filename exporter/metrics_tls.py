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

import ssl
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler

from exporter.cert_reload import certificate_reload_context
from exporter.client_ca_reload import client_ca_context, client_ca_reload_context
from exporter.refused_handshakes import tell_refused_clients
from exporter.settings import ExporterSettings, setting
from exporter.tls_files import server_context

CLIENT_CERTIFICATE_PATHS: Final = frozenset({"/metrics"})
"""The paths that need a client certificate when `--tls-client-ca-file` is given: /healthz stays open (above)."""


def serve_over_tls(app: web.Application, settings: ExporterSettings) -> ssl.SSLContext | None:
    """The context to serve `app` with (None: plain HTTP, no certificate given), its certificate reloaded for as
    long as `app` runs, and /metrics closed to clients without a certificate where a client CA is given, that CA
    reloaded too (`exporter.client_ca_reload`, which then reloads the certificate as well); a client refused in
    the handshake (plain HTTP, a certificate of another CA) told why (`exporter.refused_handshakes`). The pair
    was checked when the settings were read (`settings._check_serving_tls`)."""
    cert_file, key_file, ca_file = settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file
    if cert_file is None or key_file is None:
        return None
    if ca_file is None:
        context = server_context(cert_file, key_file)
        tell_refused_clients(context, setting("--tls-cert-file"))
        app.cleanup_ctx.append(certificate_reload_context(context, cert_file, key_file))
        return context
    context = client_ca_context(cert_file, key_file, ca_file)
    tell_refused_clients(context, setting("--tls-cert-file"))
    app.cleanup_ctx.append(client_ca_reload_context(context, cert_file, key_file, ca_file))
    app.middlewares.append(client_certificate_required)
    return context


def serving_said(settings: ExporterSettings) -> str:
    """How the exporter serves over HTTPS, for its log: what an operator checks when a scraper is refused."""
    said = f"HTTPS with the certificate {settings.tls_cert_file} (read again when it changes)"
    if settings.tls_client_ca_file is not None:
        said += (f"; /metrics only to client certificates signed by {settings.tls_client_ca_file} (read again "
                 "when it changes)")
    return said


@web.middleware
async def client_certificate_required(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 for /metrics without a client certificate. A certificate that reached here was verified by the
    handshake (`CERT_OPTIONAL` refuses one the CA did not sign), so its presence is the whole check."""
    transport = request.transport
    if request.path in CLIENT_CERTIFICATE_PATHS and not (transport and transport.get_extra_info("peercert")):
        raise web.HTTPUnauthorized(text=(
            f"/metrics needs a client certificate signed by the CA of {setting('--tls-client-ca-file')}: give "
            "Prometheus tls_config cert_file and key_file, the adapter --exporter-client-cert-file and "
            "--exporter-client-key-file\n"))
    return await handler(request)
