"""Certificate reload without a restart: cert-manager renews a certificate every 60 days of its 90 (and the
kubelet swaps a mounted Secret's files through a symlink), so an adapter that read its certificate once would
serve an expired one a few months after its last restart, and the aggregator would mark the APIService
unavailable; an exporter sidecar would be refused by every Prometheus that verifies it; the adapter's client
certificate to the exporters would be refused by them.

In `exporter` so that the adapter (its serving and its client certificate) and the exporter sidecar (its
serving certificate) reload with the one reloader, without the sidecar importing the adapter's API server.

`CertificateReloader` looks at the certificate and key files every `interval_s` (their resolved path,
inode, size and modification time, so a symlink swap counts) and, when either changed, loads the pair into the
*same* `ssl.SSLContext` the server listens with: every handshake from then on presents the new certificate,
connections already open keep theirs. A pair that does not load (the key written before the certificate, a
half-written file) keeps the old certificate and is tried again at the next look. The pair is read once into a
private snapshot (in memory, `exporter.memory_files`: the sidecar's filesystem is read-only) and tried on a
scratch context first: OpenSSL installs the certificate before it checks the key, so a mismatched pair loaded
straight into the live context would break every later handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from exporter.memory_files import files_holding

log = logging.getLogger(__name__)

Fingerprint = tuple[tuple[str, int, int, int], ...]


def fingerprint(*paths: Path) -> Fingerprint:
    """What tells a changed file (`exporter.client_ca_reload` watches with it too)."""
    marks = []
    for path in paths:
        try:
            stat = path.stat()
            marks.append((os.path.realpath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns))
        except OSError:
            marks.append((str(path), -1, -1, -1))
    return tuple(marks)


class CertificateReloader:
    """Keeps `context`'s certificate in step with `cert_file`/`key_file`; run `run()` as a task, or call
    `check()` where the user of the context has a loop of its own. `what` names the certificate in the log
    ("serving certificate", "client certificate")."""

    def __init__(self, context: ssl.SSLContext, cert_file: Path, key_file: Path, *, interval_s: float = 10.0,
                 what: str = "serving certificate") -> None:
        self._context = context
        self._what = what
        self._cert_file = cert_file
        self._key_file = key_file
        self._interval_s = interval_s
        self._loaded = fingerprint(cert_file, key_file)
        self.reloads = 0
        """Certificates loaded since start (not counting the first)."""

    def check(self) -> bool:
        """Load the files when they changed since the last load; True when a new certificate was loaded."""
        seen = fingerprint(self._cert_file, self._key_file)
        if seen == self._loaded:
            return False
        try:
            with files_holding(self._cert_file.read_bytes(), self._key_file.read_bytes()) as (cert, key):
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)  # raises on a bad pair
                self._context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError, ValueError) as error:
            log.warning("%s %s changed but does not load yet (keeping the current one): %s",
                        self._what, self._cert_file, error)
            return False
        self._loaded = seen
        self.reloads += 1
        log.info("%s reloaded from %s", self._what, self._cert_file)
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            self.check()


def certificate_reload_context(
    context: ssl.SSLContext, cert_file: Path, key_file: Path, *, interval_s: float = 10.0
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An `app.cleanup_ctx` entry running the reloader for as long as the app runs."""

    async def run(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(CertificateReloader(context, cert_file, key_file,
                                                              interval_s=interval_s).run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return run
