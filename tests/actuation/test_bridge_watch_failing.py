"""The RuntimeScale watch that makes an HPA's write reach its ServingRuntime within a round trip, when it cannot
run: a Role with `list` but not `watch` on runtimescales, an API server that refuses it for a while. The
bridge's resync still carries every write, 15 s late; the operator must be told once why, and told when
writes are carried at once again; not nothing, not a line per retry. Without the RuntimeScale CRD nothing is
carried at all, and the one line says which CRD to install."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "ml"


async def _warnings_while(kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
                          refuse_after_the_list: bool) -> list[tuple[str, str]]:
    """What the watch logs at INFO and above while four requests for runtimescales are refused with a 403: from
    the start (the list), or once it listed and watched (a watch resumed)."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    if not refuse_after_the_list:
        refused = kube.fail(r"/runtimescales$", 403, times=4)
    watch = RuntimeScaleWatch(kube_client, NS, lambda scale: None, backoff_base_s=0.01, backoff_cap_s=0.01)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        task = asyncio.create_task(watch.run())
        try:
            if refuse_after_the_list:
                await kube.wait_for_watches(1, "runtimescales")
                refused = kube.fail(r"/runtimescales$", 403, times=4)
                kube.end_watches()
            await eventually(lambda: refused.hits == 4)
            await kube.wait_for_watches(1, "runtimescales")
            # open a second: it works (a watch that ends within one with nothing in it is client-go's "very short
            # watch", no recovery)
            await eventually(lambda: any("works again" in r.getMessage() for r in caplog.records))
            kube.end_watches()  # routine: resumed, nothing to say
            await kube.wait_for_watches(1, "runtimescales")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return [(r.levelname, r.getMessage()) for r in caplog.records if "RuntimeScale" in r.getMessage()]


async def test_a_refused_runtime_scale_watch_is_warned_about_once_and_its_recovery_said(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    said = await _warnings_while(kube, kube_client, caplog, refuse_after_the_list=True)
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    assert said[0][1].startswith("replica bridge: RuntimeScale watch of namespace ml failing; HPA writes reach "
                                 "ServingRuntimes at the next resync instead of at once: watch runtimescales")
    assert "403" in said[0][1]
    assert said[1][1] == "replica bridge: RuntimeScale watch of namespace ml works again"


async def test_a_refused_runtime_scale_list_is_not_promised_to_a_resync(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A ClusterRole without `list` on runtimescales: the bridge's resync lists the same collection and is
    refused too, so no HPA write reaches a ServingRuntime; the warning said they would "at the next resync"."""
    said = await _warnings_while(kube, kube_client, caplog, refuse_after_the_list=False)
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    warning = said[0][1]
    assert warning.startswith("replica bridge: RuntimeScale list of namespace ml failing; no HPA write reaches a "
                              "ServingRuntime until it works"), warning
    assert "list runtimescales" in warning and "403" in warning and "manifests/base" in warning
    assert "next resync" not in warning
    assert said[1][1] == "replica bridge: RuntimeScale watch of namespace ml works again"


async def test_a_runtime_scale_crd_not_installed_is_named_once_not_blamed_on_a_resync_or_the_role(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """manifests/base not applied (or only the adapter's Deployment): every RuntimeScale request answers 404. The
    log promised HPA writes "at the next resync instead of at once" and the docs blamed the Role, while nothing
    would ever reach a ServingRuntime; no line named the missing CRD."""
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    not_served = kube.fail(r"^/apis/autoscaler\.modelmesh\.io/", 404, times=None)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)
    watch = RuntimeScaleWatch(kube_client, NS, bridge.wake, backoff_base_s=0.01, backoff_cap_s=0.01)
    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        task = asyncio.create_task(watch.run())
        try:
            for _ in range(3):  # the leader's passes, a resync apart, while the watch keeps retrying
                await bridge.sync()
                clock.advance(15.0)
            await eventually(lambda: not_served.hits >= 6)
            kube.clear_faults()  # the CRD applied
            kube.add_runtime_scale(NS, "triton", replicas=4)
            await kube.wait_for_watches(1, "runtimescales")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    [warning] = [message for level, message in said if level == "WARNING"]
    assert "RuntimeScale CRD runtimescales.autoscaler.modelmesh.io is not installed" in warning
    assert "apply manifests/base" in warning and "404" in warning
    assert "resync" not in warning
    assert said[-1] == ("INFO", "replica bridge: RuntimeScale watch of namespace ml works again")
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 4
