"""The RuntimeScale watches' log with `--namespaces` naming many tenants, as the platform engineer reads it: an
API server restart (a control-plane upgrade) breaks every namespace's watch at once, and that is one line, then
one when they work again, not two lines per namespace (60 with 30 namespaces)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from autoscaler.log_lists import NAMED
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

TENANTS = [f"tenant{number}" for number in range(30)]


def bridge_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "autoscaler.actuation.bridge"]


async def test_an_api_server_restart_breaking_thirty_runtime_scale_watches_is_two_lines(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    for namespace in TENANTS:
        kube.add_runtime_scale(namespace, "triton", replicas=2)
    def ignore(scale: object = None) -> None:
        """The bridge's `wake`: not what is tested."""

    tasks = [asyncio.create_task(RuntimeScaleWatch(kube_client, namespace, ignore).run()) for namespace in TENANTS]
    try:
        await kube.wait_for_watches(len(TENANTS), "runtimescales")
        caplog.set_level(logging.INFO, logger="autoscaler.actuation.bridge")
        kube.end_watches(abort=True)
        await kube.wait_for_watches(len(TENANTS), "runtimescales")
        await eventually(lambda: any("work again" in line for line in bridge_lines(caplog)))
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    lines = bridge_lines(caplog)
    assert len(lines) == 2, lines
    failing, again = lines
    assert failing.startswith(f"replica bridge: RuntimeScale watches of {len(TENANTS)} namespaces failing; HPA "
                              "writes reach their ServingRuntimes at the next resync instead of at once: tenant")
    assert again.startswith(f"replica bridge: RuntimeScale watches of {len(TENANTS)} namespaces work again: ")
    assert again.endswith(f" and {len(TENANTS) - NAMED} more")
