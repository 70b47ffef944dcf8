"""The TLS the adapter scrapes exporters with: the CA their certificates chain to, and the client certificate it
presents to exporters that ask for one (`--tls-client-ca-file` on the sidecar).

The client certificate is read again when its files change, with the reloader the serving certificates use
(`exporter.cert_reload`): cert-manager renews it, and an adapter that kept the first one would be refused by
every exporter once it expired. `ScrapeSource` calls `check()` once a refresh, before its scrapes: the refresh
loop is already there, where a task of its own would need starting and stopping beside the source. The new
certificate goes into the same context, so connections opened from then on present it; pooled ones keep theirs
until they close, which the exporters accept as they accepted it at their handshake.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from exporter.cert_reload import CertificateReloader


@dataclass(frozen=True, slots=True)
class ExporterClientTls:
    context: ssl.SSLContext | None
    """None: the system's CAs and no client certificate (aiohttp's default)."""
    client_certificate: CertificateReloader | None


def exporter_client_tls(ca_file: Path | None, cert_file: Path | None, key_file: Path | None) -> ExporterClientTls:
    """The scrape's TLS from `--exporter-ca-file` and `--exporter-client-cert-file`/`--exporter-client-key-file`
    (checked before start: `preflight`)."""
    if ca_file is None and cert_file is None:
        return ExporterClientTls(None, None)
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    if cert_file is None or key_file is None:
        return ExporterClientTls(context, None)
    context.load_cert_chain(cert_file, key_file)
    return ExporterClientTls(context, CertificateReloader(context, cert_file, key_file, what="client certificate"))
