"""The RuntimeScale watch that makes an HPA's write reach its ServingRuntime within a round trip, when it cannot
run: a Role with `list` but not `watch` on runtimescales, an API server that refuses it for a while. The
bridge's resync still carries every write, 15 s late; the operator must be told once why, and told when
writes are carried at once again; not nothing, not a line per retry."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "ml"


async def test_a_failing_runtime_scale_watch_is_warned_about_once_and_its_recovery_said(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    refused = kube.fail(r"/runtimescales$", 403, times=4)
    watch = RuntimeScaleWatch(kube_client, NS, lambda scale: None, backoff_base_s=0.01, backoff_cap_s=0.01)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        task = asyncio.create_task(watch.run())
        try:
            await eventually(lambda: refused.hits == 4)
            await kube.wait_for_watches(1, "runtimescales")
            kube.end_watches()  # routine: resumed, nothing to say
            await kube.wait_for_watches(1, "runtimescales")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    said = [(r.levelname, r.getMessage()) for r in caplog.records if "RuntimeScale watch" in r.getMessage()]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    assert said[0][1].startswith("replica bridge: RuntimeScale watch of namespace ml failing; HPA writes reach "
                                 "ServingRuntimes at the next resync instead of at once: list runtimescales")
    assert "403" in said[0][1]
    assert said[1][1] == "replica bridge: RuntimeScale watch of namespace ml works again"
