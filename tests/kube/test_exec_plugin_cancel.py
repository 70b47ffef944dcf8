"""A plugin run cancelled at any point, its start included, leaves no process of the plugin behind: asyncio,
cancelled while it starts a process, kills that process alone, and a shell wrapper (`sh -c 'aws eks get-token
...'`) may have started the real plugin by then."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kubernetes.aio.config.kube_config import ConfigNode

from autoscaler.kube.exec_plugin import run_exec_plugin
from tests.kube.client_cert_api import CertificatePlugin

STEPS = range(8)
"""How many turns of the event loop the run gets before its cancel: from before the process starts, through
its start, to its wait for the answer."""


@pytest.mark.parametrize("steps", STEPS)
async def test_a_cancelled_run_of_a_shell_wrapped_plugin_leaves_no_process(tmp_path: Path, steps: int) -> None:
    plugin = CertificatePlugin(tmp_path)
    plugin.hand_out_token("token-1", time.time() + 3600)
    plugin.hold()
    try:
        exec_config = ConfigNode("exec", plugin.exec_config(shell_wrapped=True))  # type: ignore[no-untyped-call]
        run = asyncio.create_task(run_exec_plugin(exec_config))
        for _ in range(steps):
            await asyncio.sleep(0)
        time.sleep(0.2)  # the loop stands still, as on a loaded node, while the shell starts the plugin
        run.cancel()
        done, _ = await asyncio.wait([run], timeout=30.0)  # ends in well under a second: longer is a hang
        assert done, f"a run cancelled {steps} turns in still waits, 30 s on, for the plugin the shell started"
        assert await plugin.all_ended(), f"the plugin still runs after its run was cancelled {steps} turns in"
    finally:
        plugin.release()
