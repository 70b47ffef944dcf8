"""The certificate tests' stepped clock and client-certificate kube API, and the client they connect, written once
for the test files that import them (`test_client_certificate_rotation`, `test_client_certificate_stop`).

Not a conftest: only these files need a clock that the adapter's certificate renewal and the server's expiry
check share, so other tests in tests/kube/ keep their own `clock` and `kube`. A test file takes the fixtures by
importing them (pytest finds a fixture among a module's names): `clock, kube = client_cert_fixtures.clock, ...`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import trustme

from autoscaler.kube.client import KubeClient
from tests.kube.client_cert_api import CertificatePlugin, ClientCertKubeApi, serial_of
from tests.kube.exec_token_fixtures import connect
from tests.support.clock import SteppedClock

HOUR = 3600.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SteppedClock:
    """Wall-clock time, stepped by the test, shared by the server (certificate expiry) and the adapter (renewal)."""
    stepped = SteppedClock(time.time())
    monkeypatch.setattr("autoscaler.kube.client_certificate.CLOCK", stepped)
    return stepped


@pytest.fixture
async def kube(clock: SteppedClock) -> AsyncIterator[ClientCertKubeApi]:
    """The fake kube API authenticating by client certificate, judging expiry by `clock`."""
    kube = ClientCertKubeApi(cert_clock=clock)
    async with kube:
        yield kube




async def connect_with_first(kube: ClientCertKubeApi, clock: SteppedClock,
                             plugin: CertificatePlugin) -> tuple[KubeClient, trustme.LeafCert]:
    """The adapter's client (`exec_token_fixtures.connect`), `plugin` handing out a first certificate valid an
    hour, and that one."""
    first = kube.issue("adapter", clock.now + HOUR)
    plugin.hand_out(first, clock.now + HOUR)
    return await connect(kube, plugin), first


def hand_out_another(kube: ClientCertKubeApi, clock: SteppedClock, plugin: CertificatePlugin) -> trustme.LeafCert:
    """A certificate valid two hours, which `plugin` hands out from now on (what a renewal fetches), and that one."""
    renewed = kube.issue("adapter", clock.now + 2 * HOUR)
    plugin.hand_out(renewed, clock.now + 2 * HOUR)
    return renewed


async def read_with(client: KubeClient, kube: ClientCertKubeApi, cert: trustme.LeafCert) -> None:
    """A read of the Lease answered (none there: 404, so the client was let in), sent with `cert`."""
    assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    assert kube.serials[-1] == serial_of(cert)
