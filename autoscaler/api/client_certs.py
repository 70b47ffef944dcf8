"""Which CA issued a client's certificate, and whom the certificate names.

The serving TLS context trusts the requestheader (front-proxy) CA and the client CA together, so a completed
handshake only says "some trusted CA"; it cannot say which. Identity headers must only be believed from the
front proxy, so each authenticator checks the peer's leaf itself: its issuer name matches a certificate of
*its* CA bundle and that CA's key verifies the leaf's signature (`verify_directly_issued_by`). A leaf signed
by an intermediate of the bundle is not accepted: kube-apiserver's front-proxy certificate is issued directly
by the front-proxy CA.

Validity dates are checked by OpenSSL during the handshake, and again on every request
(`ClientCertificate.valid_at`), as kube-apiserver's x509 authenticator verifies the chain at the time of each
request: a connection kept open past the expiry of its certificate, or of the CA that issued it,
authenticates no longer.

Parsing and checking a certificate costs tens of microseconds, so results are cached by the leaf's DER
bytes, and each connection keeps its own result: a TLS connection has one peer certificate for its whole
life, since the serving context refuses renegotiation (`trust_client_certificates`), so only its first
request reads the certificate (`bench/bench_request_cost.py`); later ones compare the clock with the validity
kept. A CA reload forgets both.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from cachetools import LRUCache
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from autoscaler.api.connection_memo import ConnectionMemo


class CertificateBundleError(ValueError):
    """A CA bundle holds no certificate, or something that is not one."""


@dataclass(frozen=True, slots=True)
class CertificateAuthorities:
    """The CAs one authenticator trusts (a PEM bundle may hold several, e.g. during CA rotation)."""

    certificates: tuple[x509.Certificate, ...]
    pem: str

    @classmethod
    def from_pem(cls, pem: str | bytes, source: str) -> CertificateAuthorities:
        data = pem.encode() if isinstance(pem, str) else pem
        try:
            certificates = tuple(x509.load_pem_x509_certificates(data))
        except ValueError as error:
            raise CertificateBundleError(f"{source}: not a PEM certificate bundle ({error})") from error
        if not certificates:
            raise CertificateBundleError(f"{source}: not a PEM certificate bundle (no certificate in it)")
        return cls(certificates, data.decode("ascii", "replace"))

    def issuer(self, leaf: x509.Certificate) -> x509.Certificate | None:
        """The CA of these that signed `leaf` directly, if the leaf may be used for client auth; else None."""
        if not _client_auth_allowed(leaf):
            return None
        for ca in self.certificates:
            try:
                leaf.verify_directly_issued_by(ca)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return ca
        return None


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """What the authenticators need from a verified peer certificate."""

    common_name: str
    organizations: tuple[str, ...]
    from_requestheader_ca: bool
    from_client_ca: bool
    valid_from: float = float("-inf")
    """POSIX seconds from which the leaf and the CAs that issued it are all valid."""
    valid_until: float = float("inf")
    """POSIX seconds after which one of them has expired."""

    def valid_at(self, now: float) -> bool:
        return self.valid_from <= now <= self.valid_until


def trust_client_certificates(context: ssl.SSLContext, *bundles: CertificateAuthorities | None) -> None:
    """Ask every client for a certificate (optional: bearer tokens need none) and verify any it sends against
    these CAs; a certificate from any other CA fails the handshake."""
    present = [bundle for bundle in bundles if bundle is not None]
    # No renegotiation (TLS 1.2's; 1.3 has none): a connection's peer certificate is then the one of its
    # handshake for its whole life, which lets each connection classify it once (`ClientCertificateInspector`).
    # Go's TLS server, and with it kube-apiserver, does not renegotiate either.
    context.options |= ssl.OP_NO_RENEGOTIATION
    for bundle in present:
        context.load_verify_locations(cadata=bundle.pem)
    if present:
        context.verify_mode = ssl.CERT_OPTIONAL


def _client_auth_allowed(leaf: x509.Certificate) -> bool:
    try:
        usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return ExtendedKeyUsageOID.CLIENT_AUTH in usage or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usage


def _attribute(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(attribute.value) for attribute in name.get_attributes_for_oid(oid)]


class ClientCertificateInspector:
    """Reads the peer's certificate off a request and classifies it against the two CA bundles."""

    def __init__(self, requestheader_ca: CertificateAuthorities | None, client_ca: CertificateAuthorities | None,
                 cache_size: int = 1024, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.requestheader_ca = requestheader_ca
        self.client_ca = client_ca
        self._cache: LRUCache[bytes, ClientCertificate | None] = LRUCache(maxsize=cache_size)
        self.generation = object()
        """Stands for the CA bundles in use, a new object on every `replace`: what a connection keeps
        (`ConnectionMemo`) counts only while it is the same."""

    def replace(self, requestheader_ca: CertificateAuthorities | None,
                client_ca: CertificateAuthorities | None) -> None:
        """Swap the CA bundles (a CA reload); certificates classified under the old ones are forgotten."""
        self.requestheader_ca = requestheader_ca
        self.client_ca = client_ca
        self._cache.clear()
        self.generation = object()

    def inspect(self, request: web.Request) -> ClientCertificate | None:
        """The verified client certificate of this request's connection, or None when there is none.

        Kept on the connection (`ConnectionMemo`)."""
        protocol = request.protocol
        memo = getattr(protocol, "peer_certificate", None)
        if memo is not None and memo[0] is self.generation:
            certificate = memo[1]
        else:
            transport = request.transport
            ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
            if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
                return None
            der = ssl_object.getpeercert(binary_form=True)
            certificate = self.classify(der) if der else None
            if isinstance(protocol, ConnectionMemo):
                protocol.peer_certificate = (self.generation, certificate)
        if certificate is None or not certificate.valid_at(self.clock()):
            return None
        return certificate  # type: ignore[no-any-return]

    def classify(self, der: bytes) -> ClientCertificate | None:
        try:
            return self._cache[der]
        except KeyError:
            pass
        try:
            leaf = x509.load_der_x509_certificate(der)
        except ValueError:
            result = None
        else:
            proxy_ca = self.requestheader_ca.issuer(leaf) if self.requestheader_ca is not None else None
            client_ca = self.client_ca.issuer(leaf) if self.client_ca is not None else None
            chain = [leaf, *(ca for ca in (proxy_ca, client_ca) if ca is not None)]
            result = ClientCertificate(
                common_name=next(iter(_attribute(leaf.subject, NameOID.COMMON_NAME)), ""),
                organizations=tuple(_attribute(leaf.subject, NameOID.ORGANIZATION_NAME)),
                from_requestheader_ca=proxy_ca is not None,
                from_client_ca=client_ca is not None,
                valid_from=max(c.not_valid_before_utc.timestamp() for c in chain),
                valid_until=min(c.not_valid_after_utc.timestamp() for c in chain),
            )
        self._cache[der] = result
        return result
