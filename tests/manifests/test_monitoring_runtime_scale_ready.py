"""The shipped alerts when a RuntimeScale is not Ready, as a real leading adapter reports it.

The HPA scales a RuntimeScale whatever its `Ready` condition says: when the bridge does not carry its replicas
(a second RuntimeScale for a ServingRuntime another one owns, a ServingRuntime whose autoscalerClass makes
modelmesh-serving ignore `spec.replicas`), the HPA's decisions reach no runtime and the runtime silently never
scales. Only `kubectl describe runtimescale` said so; the shipped rules fired nothing, because the adapter's
`modelmesh_autoscaler_runtime_scale_ready` gauge is also 0 in the normal state of a runtime scaled to zero (no
InferenceService uses it: Ready False, NoReplicas, until modelmesh-serving starts it), and it had no reason to
tell the two apart.

Here a real adapter leads against the fake Kubernetes API with one RuntimeScale of each kind, and its own
/metrics, held for an hour, becomes `promtool test rules` input over the shipped rules.yaml: an alert must fire
for each broken RuntimeScale, naming its reason, and none for the healthy one or the one scaled to zero. Once the
causes are removed (the duplicate deleted, the annotation taken off) the alerts resolve.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autoscaler.actuation.bridge import BridgeSettings
from autoscaler.actuation.bridge_status import AUTOSCALER_CLASS_ANNOTATION
from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics, attach
from tests.manifests.support import promtool_test_rules
from tests.manifests.test_monitoring_bridge import leading_adapter

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"  # where the base grants the adapter its writes: nothing here is refused
Snapshot = dict[str, float]  # series text (with the adapter's target labels) -> value


def runtime_scale_series(adapter: str) -> Snapshot:
    """Every `modelmesh_autoscaler_runtime_scale_*` sample of the adapter's /metrics, as Prometheus would store
    it when it scrapes the adapter pod (`honor_labels`: the RuntimeScale's namespace, not the adapter's)."""
    found: Snapshot = {}
    for sample in adapter_metrics(adapter):
        if sample.name.startswith("modelmesh_autoscaler_runtime_scale_"):
            labels = attach(ADAPTER_LABELS, sample.labels, honor_labels=True)  # as scrape-config.yaml has it
            found[sample.name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"] = (
                sample.value)
    return found


def ready_reasons(kube: FakeKubeApi, *names: str) -> dict[str, tuple[str, str]]:
    """(status, reason) of each RuntimeScale's Ready condition, as `kubectl describe` shows it."""
    found = {}
    for name in names:
        scale: dict[str, Any] = kube.get("runtimescales", NS, name) or {}
        for condition in (scale.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready":
                found[name] = (condition["status"], condition["reason"])
    return found


async def settled(kube: FakeKubeApi, expected: dict[str, tuple[str, str]]) -> None:
    async with asyncio.timeout(6 * BridgeSettings().resync_interval_s):
        while ready_reasons(kube, *expected) != expected:
            await asyncio.sleep(0.5)
    await asyncio.sleep(1)  # the gauge is set with the status write


def an_hour(first: Snapshot, then: Snapshot | None = None, minutes: int = 60) -> list[dict[str, str]]:
    """`first` for the first half hour, then `then` (a series gone from it turns stale, as Prometheus marks a
    series a scrape no longer has); without `then`, `first` for the whole hour."""
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    series = [{"series": f"up{{{target}}}", "values": f"1x{minutes}"},
              {"series": f"modelmesh_autoscaler_leader{{{target}}}", "values": f"1x{minutes}"}]
    half = minutes // 2
    for name in {*first, *(then or {})}:
        if then is None:
            values = [f"{first[name]:g}"] * (minutes + 1)
        else:
            values = ([f"{first[name]:g}" if name in first else "_"] * half
                      + [f"{then[name]:g}" if name in then else "stale"] * (minutes + 1 - half))
        series.append({"series": name, "values": " ".join(values)})
    return series


def alerts_at(tmp_path: Path, series: list[dict[str, str]], minute: int,
              expected: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """promtool's check that the alerts firing at `minute`, by alert name, RuntimeScale and reason, are
    exactly `expected` (each once)."""
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": 'count by (alertname, namespace, runtimescale, reason) (ALERTS{alertstate="firing"})',
         "eval_time": f"{minute}m",
         "exp_samples": [{"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}",
                          "value": 1} for labels in expected]}]}], "runtime_scale_ready_test.yaml")


async def test_a_runtime_scale_that_reaches_no_runtime_fires_an_alert_but_one_scaled_to_zero_does_not(
        tmp_path: Path) -> None:
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=1)
        kube.add_serving_runtime(NS, "triton")
        kube.add_runtime_scale(NS, "triton")
        kube.add_runtime_scale(NS, "triton-copy", serving_runtime="triton")  # a second one: the younger is refused
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-onnx", replicas=1)
        kube.add_serving_runtime(NS, "onnx", annotations={AUTOSCALER_CLASS_ANNOTATION: "hpa"})
        kube.add_runtime_scale(NS, "onnx", replicas=2)
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-idle", replicas=0)  # no InferenceService uses it
        kube.add_serving_runtime(NS, "idle")
        kube.add_runtime_scale(NS, "idle")
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="modelmesh-autoscaler")
        stack = contextlib.ExitStack()
        try:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(kubeconfig, tmp_path))
            await settled(kube, {"triton": ("True", "Bridged"), "triton-copy": ("False", "DuplicateRuntimeScale"),
                                 "onnx": ("False", "AutoscalerClassConflict"), "idle": ("False", "NoReplicas")})
            broken = await asyncio.to_thread(runtime_scale_series, adapter)
            done = alerts_at(tmp_path, an_hour(broken), 45, [
                {"alertname": "ModelMeshRuntimeScaleNotReady", "namespace": NS, "runtimescale": "triton-copy",
                 "reason": "DuplicateRuntimeScale"},
                {"alertname": "ModelMeshRuntimeScaleNotReady", "namespace": NS, "runtimescale": "onnx",
                 "reason": "AutoscalerClassConflict"}])
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
            done = alerts_at(tmp_path, an_hour(broken), 10, [])  # not for a moment's state: 15 minutes
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

            kube.delete_object("runtimescales", NS, "triton-copy")

            def plain(obj: dict[str, Any]) -> None:
                obj["metadata"]["annotations"].pop(AUTOSCALER_CLASS_ANNOTATION)

            kube.update_object("servingruntimes", NS, "onnx", plain)
            await settled(kube, {"triton": ("True", "Bridged"), "onnx": ("True", "Bridged"),
                                 "idle": ("False", "NoReplicas")})
            async with asyncio.timeout(4 * BridgeSettings().resync_interval_s):  # the deleted one's series go
                while any("triton-copy" in name for name in await asyncio.to_thread(runtime_scale_series, adapter)):
                    await asyncio.sleep(0.5)
            fixed = await asyncio.to_thread(runtime_scale_series, adapter)
            done = alerts_at(tmp_path, an_hour(broken, fixed), 29, [
                {"alertname": "ModelMeshRuntimeScaleNotReady", "namespace": NS, "runtimescale": "triton-copy",
                 "reason": "DuplicateRuntimeScale"},
                {"alertname": "ModelMeshRuntimeScaleNotReady", "namespace": NS, "runtimescale": "onnx",
                 "reason": "AutoscalerClassConflict"}])
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]  # until the fix, at 30
            done = alerts_at(tmp_path, an_hour(broken, fixed), 31, [])  # resolved at once
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        finally:
            await asyncio.to_thread(stack.close)
