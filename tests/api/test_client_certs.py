"""Which CA issued a client certificate: the check that decides whether identity headers are believed."""

from __future__ import annotations

import datetime
import ssl

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from autoscaler.api.client_certs import (
    CertificateAuthorities,
    CertificateBundleError,
    ClientCertificateInspector,
    trust_client_certificates,
)
from tests.support.certificates import issue_cert


def der(leaf: trustme.LeafCert) -> bytes:
    return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).public_bytes(serialization.Encoding.DER)


def bundle(*cas: trustme.CA) -> CertificateAuthorities:
    return CertificateAuthorities.from_pem(b"".join(ca.cert_pem.bytes() for ca in cas), "test")


def issue(ca: trustme.CA, common_name: str, usages: list[x509.ObjectIdentifier]) -> bytes:
    """A leaf signed by `ca` with the given extended key usages, in DER."""
    issuer = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    signing_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(issuer.subject)
        .public_key(ec.generate_private_key(ec.SECP256R1()).public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(signing_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    return certificate.public_bytes(serialization.Encoding.DER)


def test_names_and_issuers_are_read_from_the_leaf() -> None:
    proxy_ca, client_ca = trustme.CA(), trustme.CA()
    inspector = ClientCertificateInspector(bundle(proxy_ca), bundle(client_ca))
    proxy = inspector.classify(der(issue_cert(proxy_ca, common_name="front-proxy-client")))
    user = inspector.classify(der(issue_cert(client_ca, common_name="alice", organization_name="team-a")))
    assert proxy is not None and user is not None
    assert (proxy.common_name, proxy.from_requestheader_ca, proxy.from_client_ca) == ("front-proxy-client", True, False)
    assert (user.common_name, user.organizations) == ("alice", ("team-a",))
    assert (user.from_requestheader_ca, user.from_client_ca) == (False, True)


def test_a_bundle_with_two_cas_accepts_both_during_rotation() -> None:
    old, new = trustme.CA(), trustme.CA()
    inspector = ClientCertificateInspector(bundle(old, new), None)
    for ca in (old, new):
        result = inspector.classify(der(issue_cert(ca, common_name="front-proxy-client")))
        assert result is not None and result.from_requestheader_ca


def test_same_name_from_another_ca_is_not_trusted() -> None:
    proxy_ca = trustme.CA()
    inspector = ClientCertificateInspector(bundle(proxy_ca), None)
    result = inspector.classify(der(issue_cert(trustme.CA(), common_name="front-proxy-client")))
    assert result is not None and not result.from_requestheader_ca


def test_a_leaf_of_an_intermediate_is_not_directly_issued() -> None:
    root = trustme.CA()
    leaf = issue_cert(root.create_child_ca(), common_name="front-proxy-client")
    result = ClientCertificateInspector(bundle(root), None).classify(der(leaf))
    assert result is not None and not result.from_requestheader_ca


@pytest.mark.parametrize(
    ("usages", "trusted"),
    [([ExtendedKeyUsageOID.CLIENT_AUTH], True), ([ExtendedKeyUsageOID.SERVER_AUTH], False),
     ([ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE], True)],
    ids=["client auth", "server auth only", "any"],
)
def test_the_leaf_must_be_usable_for_client_auth(usages: list[x509.ObjectIdentifier], trusted: bool) -> None:
    ca = trustme.CA()
    result = ClientCertificateInspector(bundle(ca), None).classify(issue(ca, "front-proxy-client", usages))
    assert result is not None and result.from_requestheader_ca is trusted


def test_garbage_is_not_a_certificate() -> None:
    inspector = ClientCertificateInspector(bundle(trustme.CA()), None)
    assert inspector.classify(b"\x30\x03garbage") is None
    with pytest.raises(CertificateBundleError):
        CertificateAuthorities.from_pem("no pem here", "test")


def test_the_serving_context_refuses_renegotiation() -> None:
    """A connection's peer certificate is classified once (`ConnectionMemo`): that holds only if no
    renegotiation can present another certificate on the same connection."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    assert not context.options & ssl.OP_NO_RENEGOTIATION
    trust_client_certificates(context, CertificateAuthorities.from_pem(trustme.CA().cert_pem.bytes(), "test"))
    assert context.options & ssl.OP_NO_RENEGOTIATION
