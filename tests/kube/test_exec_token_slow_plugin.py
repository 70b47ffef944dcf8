"""An exec token plugin (`aws eks get-token`, `kubelogin`) that is slow or hangs while the token it gave last is
still valid: the hook waited for it from five minutes before the expiry, outside aiohttp's request timeout, so a
Lease renewal with a 3 s deadline waited a minute, then four, and the Lease blamed the API server ("not renewed
within 10 s; stopping writes"); nothing in the log named the plugin."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import pytest

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube import client_certificate, exec_plugin
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin
from tests.kube.exec_token_fixtures import connect, kube, token_plugin
from tests.support.waiting import eventually

__all__ = ["kube"]  # the fixture, taken from its module: the fake API taking token-1 alone

VALID_S = 240.0
"""The token's lifetime, whose last fifth (48 s) is when the plugin runs again..."""
LATER_S = 200.0
"""...which a test reaches by stepping the adapter's clock this far on from the connect: due, still valid."""
HANG_S = 30.0
"""Longer than any request here may take: a request still waiting then waits for the held plugin."""


@pytest.fixture
def plugin(tmp_path: Path) -> CertificatePlugin:
    return token_plugin(tmp_path, VALID_S)


@pytest.mark.parametrize("shell_wrapped", [False, True], ids=["plugin", "shell-wrapped plugin"])
async def test_requests_go_out_with_the_valid_token_while_the_plugin_hangs(
    kube: FakeKubeApi, plugin: CertificatePlugin, shell_wrapped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await connect(kube, plugin, shell_wrapped=shell_wrapped, timeout_s=3.0)
    monkeypatch.setattr(client_certificate, "CLOCK", lambda: time.time() + LATER_S)
    plugin.hold()
    try:
        for _ in range(3):
            lease = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
            done, _ = await asyncio.wait([lease], timeout=HANG_S)
            assert done, "the request still waits for the hung plugin while its token is valid"
            assert lease.result() is None  # 404: authenticated, nothing there
            assert kube.requests[-1].headers["Authorization"] == "Bearer token-1"
        # still held (the shell of a wrapped plugin may start it a moment after the requests went out, under load):
        # a plugin that answered would be gone, and this wait would fail. The held run counts itself once its
        # interpreter is up, maybe after the requests: two runs then, the one at load and the one they started.
        await eventually(lambda: plugin.processes() != [] and plugin.runs >= 2)
        assert plugin.runs == 2, "each request started the plugin again"
    finally:
        plugin.release()
        await client.close()


async def test_a_slow_plugin_run_is_said_once_naming_the_command_not_its_arguments(
    kube: FakeKubeApi, plugin: CertificatePlugin, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's arguments and environment may carry secrets (`--client-secret`): the command alone is said."""
    monkeypatch.setattr(exec_plugin, "SLOW_RUN_S", 0.2)
    client = await connect(kube, plugin, timeout_s=3.0)
    monkeypatch.setattr(client_certificate, "CLOCK", lambda: time.time() + LATER_S)
    plugin.hold()
    try:
        with caplog.at_level(logging.INFO, "autoscaler.kube"):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            await eventually(lambda: any(r.levelno == logging.WARNING for r in caplog.records))
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            plugin.release()
            await eventually(lambda: plugin.processes() == [] and len(caplog.records) > 1)
    finally:
        plugin.release()
        await client.close()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "autoscaler.kube"]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    warning, info = said[0][1], said[1][1]
    assert f"exec plugin {sys.executable} " in warning, warning
    assert "token" in warning and "0.2 s" in warning, warning
    assert str(plugin.script) not in warning + info, "the plugin's arguments were logged"
    assert info.startswith(f"Kubernetes credentials: the exec plugin {sys.executable} answered after "), info


async def test_a_request_with_an_expired_token_waits_for_the_hung_plugin_only_so_long(
    kube: FakeKubeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a valid token a request waits for the plugin, at most `SLOW_RUN_S`, then goes out with the last
    token (this fake API server still takes it; a real one answers 401, which the caller reports)."""
    monkeypatch.setattr(exec_plugin, "SLOW_RUN_S", 0.2)
    plugin = CertificatePlugin(tmp_path)
    plugin.hand_out_token("token-1", time.time() - 60)
    client = await connect(kube, plugin, timeout_s=3.0)
    plugin.hold()
    try:
        lease = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        done, _ = await asyncio.wait([lease], timeout=HANG_S)
        assert done, "the request still waits for the hung plugin"
        assert lease.result() is None
        assert kube.requests[-1].headers["Authorization"] == "Bearer token-1"
        await eventually(lambda: plugin.processes() != [])  # still held, as above
    finally:
        plugin.release()
        await client.close()


async def test_a_slow_plugin_run_that_fails_is_not_said_to_have_answered(
    kube: FakeKubeApi, plugin: CertificatePlugin, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run said slow that then fails ("not logged in") was followed by "answered after 41.2 s", which reads as
    a token at last: the line after it says the run ended without one, and why."""
    monkeypatch.setattr(exec_plugin, "SLOW_RUN_S", 0.2)
    client = await connect(kube, plugin, timeout_s=3.0)
    monkeypatch.setattr(client_certificate, "CLOCK", lambda: time.time() + LATER_S)
    plugin.hold()
    plugin.credential.unlink()  # the plugin will fail: not logged in
    try:
        with caplog.at_level(logging.INFO, "autoscaler.kube"):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            await eventually(lambda: any(r.levelno == logging.WARNING for r in caplog.records))
            plugin.release()
            await eventually(lambda: len(caplog.records) >= 3)
    finally:
        plugin.release()
        await client.close()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "autoscaler.kube"]
    assert not any("answered after" in message for _, message in said), said
    ended = said[-1][1]
    assert ended.startswith(f"Kubernetes credentials: the exec plugin {sys.executable} failed after "), said
    assert "without a new token" in ended and "not logged in" in ended, ended


async def test_a_lease_attempt_that_waits_for_the_plugin_says_so_rather_than_blame_the_api_server(
    kube: FakeKubeApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With no valid token the Lease call waits for the plugin's run (up to `SLOW_RUN_S`, 30 s), longer than the
    attempt's deadline: "no answer within 0.5 s" read as an API server that did not answer, though the call never
    went out. The warning names the plugin it waited on."""
    plugin = CertificatePlugin(tmp_path)
    plugin.hand_out_token("token-1", time.time() - 60)  # expired: every call waits for the run
    client = await connect(kube, plugin, timeout_s=3.0)
    elector = LeaseElector(client, LeaseConfig("ml", "modelmesh-autoscaler", "replica-a", lease_duration_s=1.0,
                                               renew_deadline_s=0.5, retry_period_s=0.4))
    plugin.hold()
    try:
        with caplog.at_level(logging.WARNING, "autoscaler.actuation.leader"):
            running = asyncio.create_task(elector.run())
            await eventually(lambda: any(r.name == "autoscaler.actuation.leader" for r in caplog.records))
            running.cancel()
            plugin.release()  # the Lease released on the way out needs no 30 s wait
            await asyncio.gather(running, return_exceptions=True)
    finally:
        plugin.release()
        await client.close()
    [warning, *_] = [r.getMessage() for r in caplog.records if r.name == "autoscaler.actuation.leader"]
    assert warning.startswith("lease ml/modelmesh-autoscaler: no answer within 0.5 s"), warning
    assert f"the kubeconfig's exec plugin {sys.executable}" in warning, warning
    assert "token" in warning and "not sent" in warning, warning
