"""The RuntimeScale watch when the adapter's own code fails on one RuntimeScale (a bug), as the log shows it.

The watch retries (`autoscaler.kube.retry_guard` says the bug once, with its traceback), and each retry opens the
watch again, replays that RuntimeScale and fails on it again. Every open said "works again" and the next failure
warned "failing" again: a WARNING and a false INFO at every retry, for as long as the object stayed. One warning a
failing spell; "works again" when the watch works: a list handed over, a watch run to its end or open a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from autoscaler.kube.raw import JSON
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "ml"
RETRIES = 6


def bridge_wake(scale: JSON | None) -> None:
    """The bridge's wake-up, with a bug on RuntimeScales named bad-*."""
    if scale is not None and scale["metadata"]["name"].startswith("bad"):
        raise RuntimeError(f"owner bug on {scale['metadata']['name']}")


def watches(kube: FakeKubeApi) -> int:
    return sum(1 for r in kube.requests if r.resource == "runtimescales" and r.query.get("watch"))


async def test_a_runtime_scale_the_bridge_fails_on_is_one_warning_and_works_again_only_once_it_does(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=2)
    watch = RuntimeScaleWatch(kube_client, NS, bridge_wake, backoff_base_s=0.01, backoff_cap_s=0.01)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        task = asyncio.create_task(watch.run())
        try:
            await kube.wait_for_watches(1, "runtimescales")
            opened = watches(kube)
            kube.add_runtime_scale(NS, "bad-1", replicas=1)
            await eventually(lambda: watches(kube) >= opened + RETRIES)  # each replays bad-1 and fails on it
            await eventually(lambda: any(r.levelname == "WARNING" for r in caplog.records))

            kube.delete_object("runtimescales", NS, "bad-1")
            kube.compact()  # the next watch is told 410 and lists: no bad-1 in it
            await eventually(lambda: any("works again" in r.getMessage() and r.levelname == "INFO"
                                         and "unexpected" not in r.getMessage() for r in caplog.records))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    said = [(r.levelname, r.getMessage()) for r in caplog.records if " expired (" not in r.getMessage()]
    assert [level for level, _ in said] == ["ERROR", "WARNING", "INFO", "INFO"], "\n".join(
        f"{level} {message[:160]}" for level, message in said)
    assert said[0][1].startswith("replica bridge: RuntimeScale watch of namespace ml: unexpected error "
                                 "RuntimeError('owner bug on bad-1')"), said
    assert said[1][1].startswith("replica bridge: RuntimeScale watch of namespace ml failing; "), said
    assert said[2][1].startswith("replica bridge: RuntimeScale watch of namespace ml: works again after the "
                                 "unexpected error"), said
    assert said[3][1] == "replica bridge: RuntimeScale watch of namespace ml works again", said
