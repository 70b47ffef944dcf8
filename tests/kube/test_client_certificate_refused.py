"""Refusals of an exec plugin's client certificate that are not the current certificate's, or that the plugin
cannot cure: a 401 to a request that went out with the certificate the plugin has just replaced (it said nothing of
the new one, yet ran the plugin again and held every call for it), and a plugin that hands the refused certificate
back (a cache of its own), which the token path says once and the certificate path did not say at all."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from autoscaler.kube import renewal_pace
from autoscaler.kube.client import KubeApiError
from tests.kube import client_cert_fixtures
from tests.kube.client_cert_api import CertificatePlugin, ClientCertKubeApi, serial_of
from tests.kube.client_cert_fixtures import HOUR, connect_with_first, hand_out_another
from tests.kube.test_client_certificate_rotation import call_until_served_with, refused_read, said_by_credentials
from tests.support.clock import SteppedClock
from tests.support.waiting import eventually

clock, kube = client_cert_fixtures.clock, client_cert_fixtures.kube  # the shared fixtures (pytest finds them here)

LEASE = r"/leases/modelmesh-autoscaler$"


async def test_a_401_to_the_certificate_just_replaced_leaves_the_new_one_in_use(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """A call that went out with the old certificate while the plugin ran (the run is beside the calls) and is
    answered 401 once the new one is in: the old one revoked meanwhile, or expired. The new certificate is not
    refused: the calls go on with it, and the plugin does not run again."""
    plugin = CertificatePlugin(tmp_path)
    client, first = await connect_with_first(kube, clock, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        second = hand_out_another(kube, clock, plugin)
        held = kube.hold_answer(LEASE, method="GET")
        clock.now += HOUR - 60  # renewal due, the first still valid: the call starts the run and goes out with it

        old_call = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        await eventually(lambda: held.hits == 1)
        await call_until_served_with(client, kube, second)
        runs = plugin.runs
        kube.revoked.add(serial_of(first))
        held.release()
        with pytest.raises(KubeApiError) as refused:
            await old_call
        assert refused.value.status == 401

        clock.now += renewal_pace.EXEC_RETRY_S + 1  # a refusal of the new certificate would run the plugin now
        for _ in range(3):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        assert kube.serials[-3:] == [serial_of(second)] * 3
        assert plugin.runs == runs, "the 401 to the old certificate ran the plugin again for the new one"
    finally:
        kube.clear_faults()
        await client.close()


async def test_a_plugin_that_hands_out_the_refused_certificate_again_is_said_once(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revoked, and the plugin hands it out again from its cache (`tsh` keeps its certificates): the calls go on
    refused, the plugin runs at most every `EXEC_RETRY_S` (longer than this test), and a WARNING says why, once,
    in the words the token path uses."""
    monkeypatch.setattr(renewal_pace, "EXEC_RETRY_S", HOUR)
    plugin = CertificatePlugin(tmp_path)
    client, first = await connect_with_first(kube, clock, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        runs = plugin.runs
        kube.revoked.add(serial_of(first))
        with caplog.at_level(logging.WARNING, "autoscaler.kube"):
            for _ in range(5):
                await refused_read(client)
    finally:
        await client.close()
    assert plugin.runs == runs + 1, "the plugin runs once after the first 401, then waits EXEC_RETRY_S"
    warnings = [r.getMessage() for r in said_by_credentials(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "the plugin handed out the same client certificate again" in warnings[0], warnings[0]
    assert f"exec plugin {plugin.exec_config()['command']}," in warnings[0], warnings[0]
