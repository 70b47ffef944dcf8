"""How often an exec token plugin (`aws eks get-token`, `kubelogin`) runs, and which token requests carry around a
run: one 401 that was not the token's kept the plugin running every 10 s for the token's whole lifetime, with every
request waiting for each run (a hung plugin held the Lease); requests sent while the run a 401 started was under
way went out with the refused token; and a token of 5 minutes or less, or one without an expiry, ran the plugin at
every request."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from autoscaler.kube import exec_plugin, renewal_pace
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin
from tests.kube.exec_token_fixtures import connect, kube
from tests.kube.test_exec_token_refused import HOUR, plugin, refused_read
from tests.support.waiting import eventually

__all__ = ["kube", "plugin"]  # the fixtures, taken from their modules: the fake API taking token-1 alone, and a
# plugin whose token-1 is valid for another hour

LEASE = ("ml", "modelmesh-autoscaler")


async def test_a_401_that_was_not_the_tokens_runs_the_plugin_once(
    kube: FakeKubeApi, plugin: CertificatePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server's authenticator refuses once; the plugin hands out the same token, which is taken again:
    no further run without another 401, however long the requests go on."""
    monkeypatch.setattr(renewal_pace, "EXEC_RETRY_S", 0.2)
    client = await connect(kube, plugin)
    try:
        assert await client.get_lease(*LEASE) is None
        runs = plugin.runs
        kube.require_token = "someone-else"  # the blip
        await refused_read(client)
        kube.require_token = "token-1"
        for _ in range(8):  # past several EXEC_RETRY_S
            assert await client.get_lease(*LEASE) is None
            await asyncio.sleep(0.1)
        assert plugin.runs == runs + 1, "the plugin kept running with no further 401"
        assert {r.headers["Authorization"] for r in kube.requests} == {"Bearer token-1"}
    finally:
        await client.close()


async def test_after_such_a_401_a_hung_plugin_does_not_hold_requests(
    kube: FakeKubeApi, plugin: CertificatePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin, which handed the same token out after the 401, hangs from then on (its network): requests
    with the accepted token go out without starting it, as for any valid token (a Lease renewal has 3 s)."""
    monkeypatch.setattr(renewal_pace, "EXEC_RETRY_S", 0.2)
    monkeypatch.setattr(exec_plugin, "SLOW_RUN_S", 1.0)
    client = await connect(kube, plugin)
    try:
        assert await client.get_lease(*LEASE) is None
        kube.require_token = "someone-else"
        await refused_read(client)
        kube.require_token = "token-1"
        assert await client.get_lease(*LEASE) is None  # after the run the 401 started: the same token
        runs = plugin.runs
        await asyncio.sleep(0.3)  # past EXEC_RETRY_S
        plugin.hold()
        for _ in range(3):
            assert await client.get_lease(*LEASE) is None
        assert plugin.runs == runs, "a request started the hung plugin with no 401 and waited for it"
    finally:
        plugin.release()
        await client.close()


async def test_requests_during_the_run_a_401_started_wait_for_the_new_token(
    kube: FakeKubeApi, plugin: CertificatePlugin
) -> None:
    client = await connect(kube, plugin)
    try:
        assert await client.get_lease(*LEASE) is None
        plugin.hand_out_token("token-2", time.time() + HOUR)
        kube.require_token = "token-2"  # token-1 revoked
        await refused_read(client)
        plugin.hold()  # the run takes a while (a second or two for aws eks get-token)
        first = asyncio.create_task(client.get_lease(*LEASE))
        await eventually(lambda: plugin.processes() != [])
        second = asyncio.create_task(client.get_lease(*LEASE))
        await asyncio.sleep(0.2)  # the second request on its way
        plugin.release()
        assert list(await asyncio.gather(first, second, return_exceptions=True)) == [None, None]
        refused_at = max(i for i, r in enumerate(kube.requests) if r.headers["Authorization"] == "Bearer token-1")
        assert [r.headers["Authorization"] for r in kube.requests[refused_at + 1:]] == ["Bearer token-2"] * 2
        assert plugin.runs == 2
    finally:
        plugin.release()
        await client.close()


@pytest.mark.parametrize("lifetime_s", [240.0, 60.0])
async def test_a_short_lived_token_runs_the_plugin_a_fifth_of_its_life_before_expiry(
    kube: FakeKubeApi, tmp_path: Path, lifetime_s: float
) -> None:
    plugin = CertificatePlugin(tmp_path)
    plugin.hand_out_token("token-1", time.time() + lifetime_s)  # just issued
    client = await connect(kube, plugin)
    try:
        runs = plugin.runs
        for _ in range(10):
            assert await client.get_lease(*LEASE) is None
            await asyncio.sleep(0.1)  # a run started (which the next request would join) counts itself meanwhile
        assert plugin.runs == runs, "each request ran the plugin"
    finally:
        await client.close()


async def test_a_token_without_expiry_is_not_fetched_at_every_request(
    kube: FakeKubeApi, plugin: CertificatePlugin
) -> None:
    """The renewal after a 401 states no `expirationTimestamp`: asked for again five minutes after it came."""
    client = await connect(kube, plugin)
    try:
        plugin.credential.write_text(json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                                 "kind": "ExecCredential", "status": {"token": "token-2"}}))
        kube.require_token = "token-2"
        await refused_read(client)
        assert await client.get_lease(*LEASE) is None
        runs = plugin.runs
        for _ in range(10):
            assert await client.get_lease(*LEASE) is None
            await asyncio.sleep(0.1)  # a run started (which the next request would join) counts itself meanwhile
        assert plugin.runs == runs, "each request ran the plugin"
    finally:
        await client.close()
