"""Self-signed serving certificates, for when no certificate files are given.

Kubernetes' aggregation layer can trust a self-signed serving certificate through the APIService's
`caBundle` or `insecureSkipTLSVerify`, and the demo's ModelMesh stand-in serves https like the real one; both
need a certificate without any tooling outside Python.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from exporter.tls_files import server_context as server_context  # where it lived: its importers keep their import


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    cert_file: Path
    key_file: Path


def generate_self_signed(directory: Path, common_name: str, hosts: list[str]) -> CertificateFiles:
    """Write a one-year self-signed certificate (P-256) for `hosts` (names or IP addresses) to `directory`."""
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    files = CertificateFiles(directory / "tls.crt", directory / "tls.key")
    files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key_file.chmod(0o600)
    return files


def self_signed_server_context(common_name: str, hosts: list[str]) -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate kept in a private temporary directory."""
    with tempfile.TemporaryDirectory(prefix="mm-autoscaler-cert-") as directory:
        files = generate_self_signed(Path(directory), common_name, hosts)
        return server_context(files.cert_file, files.key_file)
