"""The shipped alerts when the RuntimeScale bridge cannot write, as a real adapter reports it.

The install guides say it: for runtimes outside `modelmesh-serving`, copy `role-runtimes.yaml` and
`role-binding-runtimes.yaml` into their namespace. Without that copy the leader's bridge is refused (403) at
every resync: it cannot adopt the runtime's replicas into the RuntimeScale, write its status, or carry the HPA's
replicas to the ServingRuntime, so the runtime never follows its HPA. The adapter counts each refusal in
`modelmesh_autoscaler_bridge_writes_total{result="failed"}`; the shipped rules alerted on the same refusal for
deletion-cost patches (`ModelMeshDeletionCostPatchesFailing`), but on none for the bridge: nothing fired.

Here a real adapter leads against the fake Kubernetes API, with a RuntimeScale in a namespace the base grants no
writes in (the writes refused as the missing Role would, derived from `role-runtimes.yaml`), and its own
/metrics, at the bridge's resync pace, becomes an hour of series for a `promtool test rules` unit test over the
shipped rules.yaml: an alert must fire. Once the Role is there (the refusals end), none does.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.actuation.bridge import BridgeSettings
from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics
from tests.manifests.support import BASE, find, kustomize, promtool_test_rules
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

TEAM = "team-a"  # a runtime namespace the base's write Role (in modelmesh-serving) does not reach
MINUTES = 60


def writes_without_the_role() -> list[tuple[str, str]]:
    """(verb, resource) of every write `role-runtimes.yaml` grants: refused in a namespace without its copy."""
    role = find(kustomize(BASE), "Role", "modelmesh-autoscaler-runtimes")
    return [(verb, resource) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]]


def bridge_writes(adapter: str) -> dict[tuple[str, str], float]:
    return {(s.labels["write"], s.labels["result"]): s.value for s in adapter_metrics(adapter)
            if s.name == "modelmesh_autoscaler_bridge_writes_total"}


async def one_pass_apart(adapter: str) -> dict[tuple[str, str], float]:
    """The bridge's writes, by what and result, over one resync: between two readings that differ."""
    first = await asyncio.to_thread(bridge_writes, adapter)
    async with asyncio.timeout(4 * BridgeSettings().resync_interval_s):
        while (second := await asyncio.to_thread(bridge_writes, adapter)) == first:
            await asyncio.sleep(0.5)
        await asyncio.sleep(BridgeSettings().resync_interval_s / 3)  # the pass's writes all counted
        second = await asyncio.to_thread(bridge_writes, adapter)
    return {key: value - first.get(key, 0.0) for key, value in second.items() if value > first.get(key, 0.0)}


def an_hour(totals: dict[tuple[str, str], float], per_pass: dict[tuple[str, str], float]) -> list[dict[str, str]]:
    """An hour of the leader's series: its bridge counters from `totals`, rising by `per_pass` at every resync."""
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    passes_per_minute = 60 / BridgeSettings().resync_interval_s
    series = [{"series": f"up{{{target}}}", "values": f"1x{MINUTES}"},
              {"series": f"modelmesh_autoscaler_leader{{{target}}}", "values": f"1x{MINUTES}"}]
    for key in {*totals, *per_pass}:
        write, result = key
        step = per_pass.get(key, 0.0) * passes_per_minute
        series.append({"series": f'modelmesh_autoscaler_bridge_writes_total{{{target}, write="{write}", '
                                 f'result="{result}"}}',
                       "values": f"{totals.get(key, 0.0):g}+{step:g}x{MINUTES}"})
    return series


def firing_at(tmp_path: Path, series: list[dict[str, str]], minute: int) -> subprocess.CompletedProcess[str]:
    """promtool's answer to: how many alerts fire at `minute` (asked as `count(ALERTS{alertstate="firing"})`,
    expected 1; no alert at all gives no sample and fails)."""
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": 'count(ALERTS{alertstate="firing"})', "eval_time": f"{minute}m",
         "exp_samples": [{"labels": "{}", "value": 1}]}]}], "bridge_test.yaml")


def quiet_at(tmp_path: Path, series: list[dict[str, str]], minute: int) -> subprocess.CompletedProcess[str]:
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": 'ALERTS{alertstate="firing"}', "eval_time": f"{minute}m", "exp_samples": []}]}],
        "bridge_quiet_test.yaml")


@contextlib.contextmanager
def leading_adapter(kubeconfig: Path, workdir: Path, *flags: str) -> Iterator[str]:
    """A real adapter electing a leader against `kubeconfig`'s API, deletion costs off unless `flags` (appended
    last, so that they win) say otherwise."""
    port = free_port()
    with running(["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig),
                  "--authorization-always-allow-paths", "/healthz,/livez,/readyz,/metrics",
                  "--deletion-cost", "off", "--refresh-interval", "1", "--window", "3", "--leader-elect", "true",
                  "--leader-elect-lease-duration", "2", "--leader-elect-renew-deadline", "1.5",
                  "--leader-elect-retry-period", "0.2", *flags],
                 f"https://127.0.0.1:{port}/healthz", workdir / "adapter.log"):
        yield f"127.0.0.1:{port}"


async def test_a_runtime_namespace_without_the_write_role_fires_an_alert(tmp_path: Path) -> None:
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(TEAM, "modelmesh-serving-triton", replicas=1)
        kube.add_serving_runtime(TEAM, "triton")
        kube.add_runtime_scale(TEAM, "triton")  # as the example: no replicas, the adapter adopts the runtime's
        for verb, resource in writes_without_the_role():
            kube.forbid(verb, resource, TEAM)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="modelmesh-autoscaler")
        stack = contextlib.ExitStack()
        try:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(kubeconfig, tmp_path))
            refused = await one_pass_apart(adapter)
            assert refused and all(result == "failed" for _, result in refused), refused
            scale: dict[str, Any] = kube.get("runtimescales", TEAM, "triton") or {}
            assert "replicas" not in scale["spec"], scale  # the HPA cannot read its scale: nothing ever scales
            done = firing_at(tmp_path, an_hour({}, refused), 45)
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

            kube.clear_faults()  # the Role copied into the namespace: the runtime's replicas are adopted
            async with asyncio.timeout(4 * BridgeSettings().resync_interval_s):
                while "replicas" not in (kube.get("runtimescales", TEAM, "triton") or {}).get("spec", {}):
                    await asyncio.sleep(0.5)
            totals = await asyncio.to_thread(bridge_writes, adapter)
            done = quiet_at(tmp_path, an_hour(totals, {}), 45)  # the old refusals stay counted, no new ones
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        finally:
            await asyncio.to_thread(stack.close)
