"""A client certificate stops authenticating when it expires, on the connection already open too, as in
kube-apiserver, whose x509 authenticator verifies the peer's chain at the time of each request. Before, the
check was the TLS handshake's alone: a client that kept its connection busy (the keep-alive timeout only
closes idle ones) went on being the certificate's user, or passing identity headers as the front proxy,
for as long as it liked after the certificate expired."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from autoscaler.api.client_certs import CertificateAuthorities, ClientCertificateInspector
from autoscaler.kube.reviews import DEFAULT_TIMEOUT_S
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, PROXY_CN, Pki
from tests.api.conftest import secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.certificates import issue_cert
from tests.support.clock import SteppedClock

PATH = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
NOW = datetime.datetime.now(datetime.UTC)
NOT_AFTER = NOW + datetime.timedelta(days=1)


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock(NOW.timestamp())  # the adapter's wall clock; the handshake's own check keeps the real time


@pytest.fixture
async def url(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings],
              clock: SteppedClock) -> AsyncIterator[str]:
    kube.allow(user="hpa")
    kube.allow(user="alice")
    async with secured_api(pki, kube, settings_for(), kube_timeout_s=DEFAULT_TIMEOUT_S, clock=clock) as api:
        yield api.url + PATH


def short_lived(pki: Pki, kind: str) -> tuple[trustme.LeafCert, dict[str, str]]:
    """A certificate valid for a day, of the aggregator (with the HPA's header) or of a user."""
    if kind == "front proxy":
        return issue_cert(pki.front_proxy_ca, common_name=PROXY_CN, not_after=NOT_AFTER), {"X-Remote-User": "hpa"}
    return issue_cert(pki.client_ca, common_name="alice", not_after=NOT_AFTER), {}


@pytest.mark.parametrize("kind", ["front proxy", "client certificate"])
async def test_an_expired_certificate_stops_authenticating_on_a_connection_kept_open(
        pki: Pki, url: str, clock: SteppedClock, kind: str) -> None:
    leaf, headers = short_lived(pki, kind)
    connections = 0

    async def opened(*_: object) -> None:
        nonlocal connections
        connections += 1

    tracing = aiohttp.TraceConfig()
    tracing.on_connection_create_end.append(opened)
    connector = aiohttp.TCPConnector(ssl=pki.client_context(leaf), limit=1)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[tracing]) as session:
        async def status() -> int:
            async with session.get(url, headers=headers) as response:
                await response.read()
                return response.status

        assert [await status(), await status()] == [200, 200]
        clock.now = NOT_AFTER.timestamp() + 1
        assert [await status(), await status()] == [401, 401]
    assert connections == 1  # every request went over the one connection


def _certificate(subject: str, issuer: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey,
                 not_after: datetime.datetime, *, ca: bool) -> x509.Certificate:
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(signer, hashes.SHA256()))


def test_a_certificate_is_valid_only_while_the_ca_that_issued_it_is() -> None:
    """Kube verifies the whole chain at each request: a CA that expires before its leaf ends the leaf's
    validity with it."""
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("short-lived CA", "short-lived CA", ca_key, ca_key, NOT_AFTER, ca=True)
    leaf = _certificate(PROXY_CN, "short-lived CA", leaf_key, ca_key, NOT_AFTER + datetime.timedelta(days=365),
                        ca=False)
    bundle = CertificateAuthorities.from_pem(ca.public_bytes(serialization.Encoding.PEM), "test")

    found = ClientCertificateInspector(bundle, None).classify(leaf.public_bytes(serialization.Encoding.DER))

    assert found is not None and found.from_requestheader_ca
    assert found.valid_at(NOW.timestamp())
    assert not found.valid_at(NOT_AFTER.timestamp() + 1)
