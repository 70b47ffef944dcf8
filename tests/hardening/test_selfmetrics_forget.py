"""The adapter's own `/metrics` forgets: a runtime whose values became unknown stops reporting a served value,
and a runtime that disappeared leaves no series behind (they would otherwise go stale and accumulate)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from tests.e2e.conftest import DEPLOYMENT, data_path_running
from tests.support.processes import http_get, poll


def runtime_series(metrics_text: str, deployment: str) -> list[str]:
    return [line for line in metrics_text.splitlines()
            if not line.startswith("#") and f'deployment="{deployment}"' in line]


@pytest.mark.slow
def test_a_runtime_whose_values_turn_unknown_stops_reporting_a_served_value(tmp_path: Path) -> None:
    with data_path_running(tmp_path, adapter_args=["--max-staleness", "2"]) as path:
        served = re.compile(r'modelmesh_autoscaler_served_value\{[^}]*deployment="' + DEPLOYMENT + '"')

        def text() -> str:
            return http_get(f"{path.adapter_url}/metrics")[1]

        poll(lambda: len(served.findall(text())) >= 2, timeout=30)  # desired replicas, request load, ...
        path.kill_exporter(0)
        poll(lambda: path.served("modelmesh_request_load")[0] != 0, timeout=20)  # the API now answers 503
        series = runtime_series(text(), DEPLOYMENT)
    assert not [line for line in series if line.startswith("modelmesh_autoscaler_served_value")], series
    assert f'modelmesh_autoscaler_runtime_values_known{{deployment="{DEPLOYMENT}",namespace="default"}} 0.0' \
        in series


class ChangingSource(SourceDefaults):
    """Reports whatever runtimes the test puts in `pods_by_runtime`, all fresh."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.pods_by_runtime: dict[RuntimeKey, dict[str, float | None]] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(PodSample(name, sampled_at=now - 1, requests_per_second=20.0,
                                                     gpu_busy=busy) for name, busy in pods.items()),
                                taken_at=now, replicas=len(pods))
                for key, pods in self.pods_by_runtime.items()]

    async def close(self) -> None:
        return None


async def test_a_vanished_runtime_and_an_unknown_signal_leave_no_series() -> None:
    source = ChangingSource()
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics)
    gpu, cpu = RuntimeKey("ml", "modelmesh-serving-gpu"), RuntimeKey("ml", "modelmesh-serving-cpu")
    source.pods_by_runtime = {gpu: {"g-0": 0.6, "g-1": 0.2}, cpu: {"c-0": None}}

    def labels_of(name: str) -> set[tuple[tuple[str, str], ...]]:
        return {tuple(sorted(sample.labels.items())) for family in metrics.registry.collect()
                for sample in family.samples if family.name == name}

    await refresher.refresh_once()
    served = labels_of("modelmesh_autoscaler_served_value")
    assert (("deployment", gpu.deployment), ("metric", "modelmesh_gpu_busy"), ("namespace", "ml")) in served
    assert (("deployment", cpu.deployment), ("metric", "modelmesh_gpu_busy"), ("namespace", "ml")) not in served

    source.pods_by_runtime = {cpu: {"c-0": None}, gpu: {"g-0": None, "g-1": None}}  # GPU readings stop
    await refresher.refresh_once()
    assert not any(("metric", "modelmesh_gpu_busy") in labels for labels in labels_of(
        "modelmesh_autoscaler_served_value"))

    source.pods_by_runtime = {cpu: {"c-0": None}}  # the GPU runtime is deleted
    await refresher.refresh_once()
    for name in ("modelmesh_autoscaler_served_value", "modelmesh_autoscaler_runtime_consecutive_misses",
                 "modelmesh_autoscaler_runtime_values_known"):
        assert not any(("deployment", gpu.deployment) in labels for labels in labels_of(name)), name
        assert any(("deployment", cpu.deployment) in labels for labels in labels_of(name)), name


async def test_values_that_change_or_come_back_after_being_forgotten_read_the_new_number() -> None:
    """Only changed series are set each refresh: a changed value, and a series removed then set again (same
    value as before it was removed), must still read what this refresh decided."""
    source = ChangingSource()
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics)
    gpu = RuntimeKey("ml", "modelmesh-serving-gpu")

    def gpu_busy() -> float | None:
        return metrics.registry.get_sample_value("modelmesh_autoscaler_served_value", {
            "namespace": "ml", "deployment": gpu.deployment, "metric": "modelmesh_gpu_busy"})

    source.pods_by_runtime = {gpu: {"g-0": 0.4}}
    await refresher.refresh_once()
    assert gpu_busy() == 0.4
    await refresher.refresh_once()  # the same value again: still there
    assert gpu_busy() == 0.4
    source.pods_by_runtime = {gpu: {"g-0": 0.7}}  # rises at once
    await refresher.refresh_once()
    assert gpu_busy() == 0.7
    source.pods_by_runtime = {}  # the runtime goes away: forgotten
    await refresher.refresh_once()
    assert gpu_busy() is None
    source.pods_by_runtime = {gpu: {"g-0": 0.7}}  # and comes back with the value it had
    await refresher.refresh_once()
    assert gpu_busy() == 0.7
