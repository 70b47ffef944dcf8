"""Pod discovery's Deployment resync failing in the adapter's own code (a bug, not the API's answer), as the log
shows it: `unexpected error reading runtime Deployments in NS` and a whole traceback at every retry, every 0.5 to
30 s for as long as it lasted, where the watches say such an error once a failing spell (`RetryGuard.unexpected`).
Now the same: once with its traceback and its namespace, the repeats at DEBUG, an INFO when it works again, and
once more if it comes back after that."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
from kubernetes.aio.client import ApiClient

from autoscaler.sources.kube_deployments import DeploymentResync
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
RETRIES = 10


async def test_an_unexpected_error_at_every_resync_is_said_once_a_spell_with_its_namespace(
    api: tuple[FakeKubeApi, ApiClient], caplog: pytest.LogCaptureFixture,
) -> None:
    kube, client = api
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    broken = True
    resyncs = 0

    def session() -> ApiClient:
        """The started client, or (a bug) a TypeError."""
        if broken:
            raise TypeError("'NoneType' object is not callable")
        return client

    async def sleep(seconds: float) -> None:
        nonlocal resyncs
        resyncs += 1
        await asyncio.sleep(0)

    resync = DeploymentResync(session, static=(), discover=True, namespaces=[NS], label_selector="modelmesh-service",
                              resync_interval_s=30.0, request_timeout_s=2.0, backoff=lambda failures: 0.5,
                              on_change=lambda: None, sleep=sleep)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    task = asyncio.create_task(resync.run(asyncio.Event()))
    try:
        await eventually(lambda: resyncs >= RETRIES)
        broken = False
        await eventually(lambda: resync.ok)
        broken = True  # and again, later: a new spell, said again
        await eventually(lambda: not resync.ok)
        await eventually(lambda: resyncs >= 2 * RETRIES + 1)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    said = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    errors = [(message, traced) for level, message, traced in said if level == "ERROR"]
    assert len(errors) == 2, said  # one a spell, not one a resync
    assert all(traced for _, traced in errors), errors
    assert all("unexpected error TypeError(\"'NoneType' object is not callable\") in all namespaces" in message
               for message, _ in errors), errors
    assert any(level == "INFO" and "works again in all namespaces after the unexpected error" in message
               for level, message, _ in said), said
