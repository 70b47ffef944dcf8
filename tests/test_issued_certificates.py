"""The certificates the tests and benchmarks issue (`tests.support.certificates`) work under every cryptography the
adapter allows (`cryptography>=42`, 51 included), and a client certificate given no identity still names no host.

cryptography 51 refuses the empty subjectAltName trustme 1.2.1 writes into a certificate issued with a common name
alone, and every TLS test erred on a clean install; each such call now goes through `issue_cert`.
"""

from __future__ import annotations

import re
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from autoscaler.api.client_certs import CertificateAuthorities, ClientCertificateInspector
from tests.support.certificates import NO_HOST, issue_cert

REPO = Path(__file__).resolve().parents[1]
HELPER = REPO / "tests" / "support" / "certificates.py"
DIRECT = re.compile(r"\.issue_cert\(")


def test_a_client_certificate_issued_with_no_identity_names_no_host_and_is_read_by_its_subject() -> None:
    """The adapter reads a client certificate's CN (user) and O (groups), never its subjectAltName: the one name
    `issue_cert` adds is under `.invalid`, which no server is called, and the user the adapter sees is unchanged."""
    client_ca = trustme.CA()
    leaf = issue_cert(client_ca, common_name="alice", organization_name="analysts")
    certificate = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [name.value for name in names] == [NO_HOST]
    assert NO_HOST.endswith(".invalid")
    inspector = ClientCertificateInspector(None, CertificateAuthorities.from_pem(client_ca.cert_pem.bytes(), "ca"))
    seen = inspector.classify(certificate.public_bytes(Encoding.DER))
    assert seen is not None
    assert (seen.common_name, seen.organizations, seen.from_client_ca) == ("alice", ("analysts",), True)


def test_a_certificate_given_identities_names_those_alone() -> None:
    leaf = issue_cert(trustme.CA(), "127.0.0.1", "localhost", common_name="server")
    certificate = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(name.value) for name in names] == ["127.0.0.1", "localhost"]


def test_no_test_or_benchmark_asks_trustme_for_a_certificate_directly() -> None:
    """Asking a trustme CA directly for a certificate named by its subject alone passes under cryptography 50 and
    errs under 51: the next such call is caught here, on any installed version, not on the first clean install."""
    direct = [f"{path.relative_to(REPO)}:{number}"
              for folder in ("tests", "bench") for path in sorted((REPO / folder).rglob("*.py")) if path != HELPER
              for number, line in enumerate(path.read_text().splitlines(), 1) if DIRECT.search(line)]
    assert direct == []
