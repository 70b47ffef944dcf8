"""An exec plugin run under way when the adapter stops: the plugin renewing the client certificate (Teleport's
`tsh` asking its proxy, a plugin on a loaded node) is a process of its own, and a stopped adapter left it
running, as `ps` showed, until it answered whoever no longer asked (never, for one that waits on a login)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from autoscaler.kube.client import KubeClient
from tests.kube import client_cert_fixtures
from tests.kube.client_cert_api import CertificatePlugin, ClientCertKubeApi
from tests.kube.client_cert_fixtures import HOUR
from tests.kube.exec_token_fixtures import connect
from tests.support.clock import SteppedClock
from tests.support.processes import free_port, running
from tests.support.waiting import eventually

LIFETIME_S = 10.0
"""The certificates the plugin signs for `serve` (a real process, on the real clock): renewed 2 s before expiry."""
HANG_S = 30.0
"""A close that has not ended this long after it began is taken as hung (it ends in well under a second)."""

clock, kube = client_cert_fixtures.clock, client_cert_fixtures.kube  # the shared fixtures (pytest finds them here)


@pytest.fixture
def plugin(tmp_path: Path) -> CertificatePlugin:
    return CertificatePlugin(tmp_path)


async def renewing(client: KubeClient, plugin: CertificatePlugin, clock: SteppedClock) -> None:
    """Set a plugin run off (due: a minute before the certificate expires) and leave it waiting, held."""
    assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    runs = plugin.runs
    plugin.hold()
    clock.now += HOUR - 60
    assert await client.get_lease("ml", "modelmesh-autoscaler") is None  # goes on with the certificate it has
    await eventually(lambda: plugin.runs > runs and plugin.processes() != [])


async def test_closing_the_client_ends_the_plugin_run_and_its_process(
    kube: ClientCertKubeApi, clock: SteppedClock, plugin: CertificatePlugin
) -> None:
    plugin.hand_out(kube.issue("adapter", clock.now + HOUR), clock.now + HOUR)
    client = await connect(kube, plugin)
    try:
        await renewing(client, plugin, clock)
    finally:
        await client.close()
    try:
        assert plugin.processes() == [], "the plugin still runs after the client closed"
    finally:
        plugin.release()


async def test_closing_the_client_ends_a_shell_wrapped_plugin_with_its_shell(
    kube: ClientCertKubeApi, clock: SteppedClock, plugin: CertificatePlugin
) -> None:
    """`sh -c 'tsh kube credentials ...'`: the shell runs the plugin as its child, which ending the shell alone
    left running, and the close then waited for it (its output pipe still open): a stopping adapter hung."""
    plugin.hand_out(kube.issue("adapter", clock.now + HOUR), clock.now + HOUR)
    client = await connect(kube, plugin, shell_wrapped=True)
    try:
        await renewing(client, plugin, clock)
    finally:
        closing = asyncio.create_task(client.close())
        done, _ = await asyncio.wait([closing], timeout=HANG_S)
    try:
        assert done, f"closing the client still waits, {HANG_S:g} s on, for the plugin the shell started"
        assert await plugin.all_ended(), "the plugin the shell started still runs after the client closed"
    finally:
        plugin.release()


@pytest.mark.slow
async def test_a_stopped_serve_leaves_no_plugin_process(tmp_path: Path, plugin: CertificatePlugin) -> None:
    """SIGTERM while the plugin renews the certificate of discovery, the HPA watch or both."""
    kube = ClientCertKubeApi()
    async with kube:
        kube.add_modelmesh_runtime("ml", "modelmesh-serving-triton", replicas=1)
        plugin.sign_each_run(kube.client_ca, LIFETIME_S)
        port, log = free_port(), tmp_path / "adapter.log"
        try:
            with contextlib.ExitStack() as stack:
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--workers", "0",
                     "--kubeconfig", str(plugin.kubeconfig(kube, "ml")), "--namespaces", "ml",
                     "--leader-elect", "false", "--deletion-cost", "off"],
                    f"https://127.0.0.1:{port}/healthz", log))
                plugin.hold()
                runs = plugin.runs
                while not (plugin.runs > runs and plugin.processes()):  # the watches list again: a renewal due
                    kube.end_watches()
                    await asyncio.sleep(0.5)
                await asyncio.to_thread(stack.close)  # SIGTERM, and wait for the exit
            assert plugin.processes() == [], f"the plugin still runs after serve stopped:\n{log.read_text()}"
        finally:
            plugin.release()
