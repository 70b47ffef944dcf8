"""The client CA (`--tls-client-ca-file`) reloaded without a restart, with the serving certificate beside it.

Why: a rotated CA (cert-manager's CA Issuer given a new CA, an in-house CA renewed) signs the adapter's and
Prometheus's next client certificates; an exporter that read the bundle once refused them in the handshake
until every runtime pod was restarted, and went on trusting a CA dropped from the bundle.

Why a new context, not `load_verify_locations` on the one the port listens with: OpenSSL's trust store only
grows, so a dropped CA would stay trusted. Each change of the certificate, its key or the bundle builds a whole
new context (`client_ca_context`), tried before it is used: a bundle or pair that does not load keeps the
current one, and is tried again at the next look. The listening context hands every handshake to the newest
one as the client's hello arrives (its `sni_callback`, called with or without a server name): connections from
then on present its certificate and verify against its CAs; connections already open keep theirs, as with
`CertificateReloader`, which this replaces where a client CA is given (one watcher, so the serving certificate
renewed later lands in the context handshakes use).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from exporter.cert_reload import fingerprint
from exporter.settings import setting
from exporter.tls_files import server_context

log = logging.getLogger(__name__)

FLAGS = ("--tls-cert-file", "--tls-key-file", "--tls-client-ca-file")
"""The settings the watched files come from, in the reloader's order: what a warning names."""


def client_ca_context(cert_file: Path, key_file: Path, ca_file: Path) -> ssl.SSLContext:
    """Serving with this certificate, asking every client for one (`CERT_OPTIONAL`: the kubelet's probes send
    none, `exporter.metrics_tls`) and refusing one these CAs did not sign."""
    context = server_context(cert_file, key_file)
    context.load_verify_locations(cafile=str(ca_file))
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


class ClientCaReloader:
    """Keeps the handshakes of `listening` on a context built from the files as they are now."""

    def __init__(self, listening: ssl.SSLContext, cert_file: Path, key_file: Path, ca_file: Path, *,
                 interval_s: float = 10.0) -> None:
        self._files = (cert_file, key_file, ca_file)
        self._interval_s = interval_s
        self._loaded = fingerprint(*self._files)
        self._current = listening
        listening.sni_callback = self._hand_over

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None, listening: ssl.SSLContext) -> None:
        if self._current is not listening:
            connection.context = self._current

    def check(self) -> bool:
        """Build a new context when a file changed since the last build; True when handshakes now use it."""
        seen = fingerprint(*self._files)
        if seen == self._loaded:
            return False
        cert_file, key_file, ca_file = self._files
        changed = [(flag, path) for flag, path, before, now in zip(FLAGS, self._files, self._loaded, seen, strict=True)
                   if before != now]
        try:
            fresh = client_ca_context(cert_file, key_file, ca_file)
        except (OSError, ssl.SSLError, ValueError) as error:
            log.warning("%s changed but does not load (%s): handshakes keep the certificate and client CAs loaded "
                        "before, and the files are read again in %g s; the CA bundle must hold PEM certificates, "
                        "the certificate and key must be a PEM pair",
                        " and ".join(f"{setting(flag)} {path}" for flag, path in changed), error, self._interval_s)
            return False
        self._current, self._loaded = fresh, seen
        flags = {flag for flag, _ in changed}
        if flags & {"--tls-cert-file", "--tls-key-file"}:
            log.info("serving certificate reloaded from %s", cert_file)
        if "--tls-client-ca-file" in flags:
            log.info("client CA reloaded from %s", ca_file)
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            self.check()


def client_ca_reload_context(
    listening: ssl.SSLContext, cert_file: Path, key_file: Path, ca_file: Path
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An `app.cleanup_ctx` entry running the reloader for as long as the app runs."""
    reloader = ClientCaReloader(listening, cert_file, key_file, ca_file)

    async def run(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(reloader.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return run
