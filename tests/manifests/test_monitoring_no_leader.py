"""The shipped alert when no adapter replica leads, as a real adapter reports it.

Only the leader writes to the cluster: pod deletion costs, and with the RuntimeScale bridge on (the default where
runtimes are discovered in Kubernetes) every HPA's replicas, carried from its RuntimeScale to the ServingRuntime.
With no leader (a Role whose `resourceNames` misses the Lease: every get, update and create refused) the HPA goes on
writing its RuntimeScale, reports SuccessfulRescale, and nothing moves; the RuntimeScale's status keeps what the
last leader wrote (READY True, Bridged), and no replica publishes `runtime_scale_not_ready`, so
`ModelMeshRuntimeScaleNotReady` cannot fire. The one alert left, `ModelMeshAutoscalerNoLeader`, was a warning
about deletion costs only: nobody was told that autoscaling had stopped.

Here a real adapter leads against the fake Kubernetes API, then loses its Lease to a 403 and the HPA asks 6 of a
runtime at 3; its own /metrics, held for ten minutes, becomes `promtool test rules` input over the shipped
rules.yaml, and the alerts sent are read as Alertmanager would get them (labels and rendered annotations).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics
from tests.manifests.support import alerts_sent
from tests.manifests.test_monitoring_bridge import leading_adapter

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
LEASE_NAMESPACE = "modelmesh-autoscaler"  # the adapter's own namespace (the kubeconfig's): where its Lease lives


def leader_value(adapter: str) -> float | None:
    return next((s.value for s in adapter_metrics(adapter) if s.name == "modelmesh_autoscaler_leader"), None)


def ready(kube: FakeKubeApi) -> tuple[str, str] | None:
    scale: dict[str, Any] = kube.get("runtimescales", NS, "triton") or {}
    return next(((c["status"], c["reason"]) for c in (scale.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)


async def until(check: Any, timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not await asyncio.to_thread(check):
            await asyncio.sleep(0.3)


def ten_minutes(leader: float) -> list[dict[str, str]]:
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    return [{"series": f"up{{{target}}}", "values": "1x10"},
            {"series": f"modelmesh_autoscaler_leader{{{target}}}", "values": f"{leader:g}x10"}]


async def test_no_leader_with_the_bridge_on_sends_a_critical_alert_that_scaling_has_stopped(tmp_path: Path) -> None:
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=3)
        kube.add_serving_runtime(NS, "triton", replicas=3)
        kube.add_runtime_scale(NS, "triton", replicas=3)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=LEASE_NAMESPACE)
        stack = contextlib.ExitStack()
        try:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(kubeconfig, tmp_path))
            await until(lambda: ready(kube) == ("True", "Bridged") and leader_value(adapter) == 1)
            for verb in ("get", "update", "create"):  # a Role whose resourceNames misses the Lease
                kube.forbid(verb, "leases", LEASE_NAMESPACE)
            await until(lambda: leader_value(adapter) == 0)
            kube.update_object("runtimescales", NS, "triton", lambda scale: scale["spec"].update(replicas=6))
            await asyncio.sleep(3)
            assert kube.serving_runtime_replicas(NS, "triton") == 3  # the HPA's 6 reaches nothing
            assert ready(kube) == ("True", "Bridged")  # what the last leader wrote: nobody can correct it
            leader = await asyncio.to_thread(leader_value, adapter)
        finally:
            await asyncio.to_thread(stack.close)
    assert leader == 0
    sent = alerts_sent(tmp_path, ten_minutes(leader), 10)
    no_leader = [alert for alert in sent if alert.labels["alertname"] == "ModelMeshAutoscalerNoLeader"]
    assert len(no_leader) == 1, sent
    alert = no_leader[0]
    assert alert.labels["severity"] == "critical", alert  # as ModelMeshAutoscalerDown: nothing scales
    said = " ".join((alert.annotations["summary"], alert.annotations["description"]))
    for words in ("HPA", "ServingRuntime", "READY", "kubectl -n modelmesh-autoscaler get lease"):
        assert words in said, f"the alert does not say {words!r}: {said}"
    assert "scal" in alert.annotations["summary"].lower(), alert.annotations["summary"]
