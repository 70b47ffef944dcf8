"""The shipped alert for another writer fighting the RuntimeScale bridge, as a real adapter reports the fight.

Argo CD with self-heal applying a ServingRuntime manifest that still says `replicas:`, a mutating admission
policy or another operator puts the runtime's replicas back each time the bridge sets them to the HPA's ask: the
runtime's pods flap between two sizes. The bridge damps the fight (5 set-backs a minute, then one each full pass)
and counts every set-back in `modelmesh_autoscaler_bridge_set_backs_total`, with one WARNING every 10 minutes,
but no shipped alert read the counter: an SRE learned of a fight only from the logs.

Here a real adapter leads against the fake Kubernetes API while a stand-in for that writer puts the runtime back
within 5 ms of each change; the adapter's own /metrics, at the rate the damped fight keeps, becomes an hour of
series for a `promtool test rules` unit test over the shipped rules.yaml: an alert must fire. A person's one
`kubectl edit` (one set-back) fires none.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from autoscaler.actuation.bridge import BridgeSettings
from autoscaler.actuation.bridge_memory import FIGHT_SET_BACKS
from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics
from tests.manifests.test_monitoring_bridge import MINUTES, firing_at, leading_adapter, quiet_at

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"  # the base's write Role reaches it: every set-back is written
ASKED, THEIRS = 3, 1


def set_backs(adapter: str) -> float:
    """The adapter's `modelmesh_autoscaler_bridge_set_backs_total` (0 before its first)."""
    return sum(s.value for s in adapter_metrics(adapter) if s.name == "modelmesh_autoscaler_bridge_set_backs_total")


def an_hour(values: str) -> list[dict[str, str]]:
    """An hour of the leader's series, its set-backs counter taking promtool's `values`."""
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    return [{"series": f"up{{{target}}}", "values": f"1x{MINUTES}"},
            {"series": f"modelmesh_autoscaler_leader{{{target}}}", "values": f"1x{MINUTES}"},
            {"series": f"modelmesh_autoscaler_bridge_set_backs_total{{{target}}}", "values": values}]


def put_back(kube: FakeKubeApi) -> None:
    """The other writer's write: ServingRuntime `triton` at its manifest's replicas."""
    kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=THEIRS))


async def other_writer(kube: FakeKubeApi) -> None:
    """Puts the runtime back at `THEIRS` within 5 ms of any change, until cancelled (Argo CD self-heal)."""
    while True:
        if kube.serving_runtime_replicas(NS, "triton") != THEIRS:
            put_back(kube)
        await asyncio.sleep(0.005)


async def counted(adapter: str, at_least: float) -> float:
    """The set-backs counted, once `at_least` are (within a few resyncs)."""
    async with asyncio.timeout(4 * BridgeSettings().resync_interval_s):
        while (total := await asyncio.to_thread(set_backs, adapter)) < at_least:
            await asyncio.sleep(0.2)
    return total


async def test_another_writer_fighting_the_bridge_fires_an_alert_and_one_edit_does_not(tmp_path: Path) -> None:
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=THEIRS)
        kube.add_serving_runtime(NS, "triton", replicas=THEIRS)
        kube.add_runtime_scale(NS, "triton", replicas=ASKED)  # the HPA asks 3
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="modelmesh-autoscaler")
        stack = contextlib.ExitStack()
        try:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(kubeconfig, tmp_path))
            async with asyncio.timeout(4 * BridgeSettings().resync_interval_s):
                while kube.serving_runtime_replicas(NS, "triton") != ASKED:
                    await asyncio.sleep(0.2)

            # one `kubectl edit`: set back once, and no alert
            put_back(kube)
            edited = await counted(adapter, 1)
            await asyncio.sleep(BridgeSettings().resync_interval_s)  # a full pass: nothing more to set back
            assert await asyncio.to_thread(set_backs, adapter) == edited == 1
            done = quiet_at(tmp_path, an_hour(f"0x10 1x{MINUTES - 10}"), 13)
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

            # the fight: at the rate the damped bridge keeps, set-backs for an hour fire the alert
            writer = asyncio.create_task(other_writer(kube))
            try:
                damped = await counted(adapter, edited + FIGHT_SET_BACKS)
                started = time.monotonic()
                await asyncio.sleep(2 * BridgeSettings().resync_interval_s)
                # at least one more, however late a loaded machine makes the passes of those two resyncs: read at
                # once, the count could still be `damped`, a fight counted as none
                total = await counted(adapter, damped + 1)
                per_minute = (total - damped) * 60 / (time.monotonic() - started)
            finally:
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await writer
            assert 0 < per_minute <= 2 * FIGHT_SET_BACKS, per_minute  # damped: no write war
            done = firing_at(tmp_path, an_hour(f"{damped:g}+{per_minute:.3f}x{MINUTES}"), 45)
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        finally:
            await asyncio.to_thread(stack.close)
