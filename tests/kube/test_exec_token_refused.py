"""An exec plugin's token that the API server stops taking before the expiry the plugin gave: an EKS token whose
STS session was revoked, an OIDC session ended, a token rotated early. kubectl (client-go) runs the plugin again
after a 401; the adapter ran it only 5 minutes before that expiry (up to 15 minutes on for EKS), and every call
meanwhile was answered 401 Unauthorized."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from autoscaler.kube import client_certificate, renewal_pace
from autoscaler.kube.client import KubeApiError, KubeClient
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin
from tests.kube.exec_token_fixtures import connect, kube, token_plugin
from tests.support.clock import SteppedClock
from tests.support.waiting import eventually

__all__ = ["kube"]  # the fixture, taken from its module: the fake API taking token-1 alone

HOUR = 3600.0


@pytest.fixture
def plugin(tmp_path: Path) -> CertificatePlugin:
    """A plugin whose token-1 is valid for another hour: nothing but a 401 makes it run again."""
    return token_plugin(tmp_path, HOUR)


async def refused_read(client: KubeClient) -> None:
    with pytest.raises(KubeApiError) as refused:
        await client.get_lease("ml", "modelmesh-autoscaler")
    assert refused.value.status == 401


async def test_a_token_the_server_refuses_is_fetched_again_after_the_401(
    kube: FakeKubeApi, plugin: CertificatePlugin
) -> None:
    """The call that met the 401 fails (its caller retries, as with any error); the next goes out with the token
    the plugin hands out now."""
    client = await connect(kube, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None  # 404: authenticated, nothing there
        runs = plugin.runs
        plugin.hand_out_token("token-2", time.time() + HOUR)
        kube.require_token = "token-2"  # token-1 revoked, an hour before its expiry

        await refused_read(client)
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        assert kube.requests[-1].headers["Authorization"] == "Bearer token-2"
        assert plugin.runs == runs + 1
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        assert plugin.runs == runs + 1, "the plugin ran again although its new token was taken"
    finally:
        await client.close()


async def test_a_plugin_that_hands_out_the_refused_token_again_is_not_run_for_every_call(
    kube: FakeKubeApi, plugin: CertificatePlugin, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's own cache (`aws eks get-token` keeps none, `kubelogin` does) or a 401 that is not the token's
    (the API server's authenticator webhook down): running the plugin at every call would start a process per
    request; it runs at most every `EXEC_RETRY_S` (longer than this test), and a WARNING says so once."""
    monkeypatch.setattr(renewal_pace, "EXEC_RETRY_S", HOUR)
    client = await connect(kube, plugin)
    try:
        runs = plugin.runs
        kube.require_token = "token-2"  # token-1 refused, and the plugin keeps handing it out
        with caplog.at_level(logging.WARNING, "autoscaler.kube"):
            for _ in range(5):
                await refused_read(client)
        assert plugin.runs == runs + 1, "the plugin runs once after the first 401, then waits EXEC_RETRY_S"
        warnings = [r.getMessage() for r in caplog.records
                    if r.name == "autoscaler.kube" and r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "401" in warnings[0] and "same token" in warnings[0]
        assert f"{plugin.exec_config()['command']}" in warnings[0]
    finally:
        await client.close()


async def test_a_401_to_the_token_just_replaced_leaves_the_new_one_in_use(
    kube: FakeKubeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that went out with the old token while the plugin ran (the run is beside the calls) and is answered
    401 once the new token is in: the new token is not refused, and the plugin does not run again for it."""
    plugin = token_plugin(tmp_path, 240.0)  # its last fifth (48 s) is when the plugin runs again
    client = await connect(kube, plugin)
    clock = SteppedClock(time.time())
    monkeypatch.setattr(client_certificate, "CLOCK", clock)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        plugin.hand_out_token("token-2", time.time() + HOUR)
        kube.tokens["token-2"] = ("adapter", [])  # the server takes both until token-1 is revoked
        held = kube.hold_answer(r"/leases/modelmesh-autoscaler$", method="GET")
        clock.advance(200.0)  # renewal due, token-1 still valid: the call starts the run and goes out with it

        old_call = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        await eventually(lambda: held.hits == 1)
        async with asyncio.timeout(30):  # a hang guard: the run lands between two calls
            while kube.requests[-1].headers["Authorization"] != "Bearer token-2":
                assert await client.get_lease("ml", "modelmesh-autoscaler") is None
                await asyncio.sleep(0.01)
        runs = plugin.runs
        kube.require_token = "token-2"  # token-1 revoked
        held.release()
        await refused_read_of(old_call)

        clock.advance(renewal_pace.EXEC_RETRY_S + 1)  # a refusal of token-2 would run the plugin now
        for _ in range(3):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        assert kube.requests[-1].headers["Authorization"] == "Bearer token-2"
        assert plugin.runs == runs, "the 401 to the old token ran the plugin again for the new one"
    finally:
        kube.clear_faults()
        await client.close()


async def refused_read_of(call: asyncio.Task[object]) -> None:
    with pytest.raises(KubeApiError) as refused:
        await call
    assert refused.value.status == 401
