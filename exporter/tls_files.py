"""TLS contexts from certificate files, shared by the adapter and the exporter sidecar.

In `exporter` for the reason `env_flags` is: the adapter may import the exporter, never the other way round, and
the sidecar must not load the adapter's API server to serve its own /metrics over TLS. One server context and one
check of a certificate and its key for both programs, so that both serve the same TLS suites and name a broken
file the same way.
"""

from __future__ import annotations

import ssl
from pathlib import Path

TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""TLS 1.2 suites: ECDHE with AES-GCM or ChaCha20-Poly1305, what Go (and so kube-apiserver, the aggregator,
the kubelet and Prometheus) prefers. Python's default list adds CBC suites with SHA-256/384 MACs, which Go
lists as insecure (Lucky13) and never offers, and finite-field DHE. TLS 1.3 suites are all AEAD, unchanged."""


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS 1.2+ server context for the given certificate, with forward-secret AEAD suites only."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.load_cert_chain(cert_file, key_file)
    return context


def pair_problem(cert_file: Path, key_file: Path, cert_setting: str, key_setting: str) -> str | None:
    """Why `cert_file` and `key_file` do not load as a certificate and its key, naming the setting that gave
    each (None: they load). `ssl` names neither file ("No such file or directory", "PEM lib"), so each is read
    first under its setting, then the pair is loaded as serving will load it."""
    for setting, path in ((cert_setting, cert_file), (key_setting, key_file)):
        try:
            with open(path, "rb"):
                pass
        except OSError as error:
            return f"{setting} {path}: cannot read it: {error.strerror or error}"
    try:
        server_context(cert_file, key_file)
    except ssl.SSLError as error:
        return (f"{cert_setting} {cert_file} and {key_setting} {key_file} are not a PEM certificate and its "
                f"private key: {error}")
    return None
