"""An exec plugin fetching a token (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`) when the request
that found the token expired gives up (its deadline, the adapter stopping): the plugin is a process of its own,
and a cancelled request left it running, as `ps` showed, until it answered nobody (never, for one waiting on a
login); the next request started another."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin
from tests.kube.exec_token_fixtures import connect, kube, token_plugin
from tests.support.processes import free_port, running
from tests.support.waiting import eventually

__all__ = ["kube"]  # the fixture, taken from its module: the fake API taking token-1 alone

EXPIRED_S = -60.0
"""The tokens' lifetime: already expired (the fake API server does not check expiries), so every request runs the
plugin again and waits for it; a token still valid goes out while the plugin runs."""


@pytest.fixture
def plugin(tmp_path: Path) -> CertificatePlugin:
    return token_plugin(tmp_path, EXPIRED_S)


async def give_up_while_the_plugin_runs(client: KubeClient, plugin: CertificatePlugin) -> None:
    """A request that finds the token expired runs the plugin, held, and is cancelled while it waits for it."""
    runs = plugin.runs
    plugin.hold()
    request = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
    await eventually(lambda: plugin.runs > runs and plugin.processes() != [])
    request.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await request


@pytest.mark.parametrize("shell_wrapped", [False, True], ids=["plugin", "shell-wrapped plugin"])
async def test_closing_the_client_ends_the_token_plugin_run_and_its_process(
    kube: FakeKubeApi, plugin: CertificatePlugin, shell_wrapped: bool
) -> None:
    client = await connect(kube, plugin, shell_wrapped=shell_wrapped)
    try:
        await give_up_while_the_plugin_runs(client, plugin)
    finally:
        closing = asyncio.create_task(client.close())
        done, _ = await asyncio.wait([closing], timeout=30.0)  # ends in well under a second: longer is a hang
    try:
        assert done, "closing the client still waits, 30 s on, for the plugin"
        assert await plugin.all_ended(), "the plugin still runs after the request gave up and the client closed"
    finally:
        plugin.release()


async def test_a_request_that_gives_up_leaves_the_plugin_run_to_the_next_one(
    kube: FakeKubeApi, plugin: CertificatePlugin
) -> None:
    """The run goes on for whoever asks next, which gets its token without starting the plugin again."""
    client = await connect(kube, plugin)
    try:
        runs = plugin.runs
        await give_up_while_the_plugin_runs(client, plugin)
        plugin.hand_out_token("token-2", time.time() + EXPIRED_S)
        kube.require_token = "token-2"  # the old token no longer authenticates
        plugin.release()
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None  # 404: authenticated, nothing there
        assert kube.requests[-1].headers["Authorization"] == "Bearer token-2"
        assert plugin.runs == runs + 1, "the plugin ran again for the next request"
    finally:
        plugin.release()
        await client.close()


@pytest.mark.slow
async def test_a_stopped_serve_leaves_no_token_plugin_process(tmp_path: Path, plugin: CertificatePlugin) -> None:
    """SIGTERM while a shell-wrapped plugin fetches the token of discovery, the HPA watch or both."""
    async with FakeKubeApi(require_token="token-1") as kube:
        kube.add_modelmesh_runtime("ml", "modelmesh-serving-triton", replicas=1)
        port, log = free_port(), tmp_path / "adapter.log"
        try:
            with contextlib.ExitStack() as stack:
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--workers", "0",
                     "--kubeconfig", str(plugin.kubeconfig(kube, "ml", shell_wrapped=True)), "--namespaces", "ml",
                     "--leader-elect", "false", "--deletion-cost", "off"],
                    f"https://127.0.0.1:{port}/healthz", log))
                plugin.hold()
                runs = plugin.runs
                while not (plugin.runs > runs and plugin.processes()):  # the watches list again: the plugin runs
                    kube.end_watches()
                    await asyncio.sleep(0.5)
                await asyncio.to_thread(stack.close)  # SIGTERM, and wait for the exit
            assert await plugin.all_ended(), f"the plugin still runs after serve stopped:\n{log.read_text()}"
        finally:
            plugin.release()
