"""The refresh loop warms up every runtime it has no memory of (`autoscaler.policies.warmup`): its own
`/metrics` says which runtimes are warming up, and forgets them when they are warm or gone."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

KEY = RuntimeKey("ml", "modelmesh-serving-triton")
GAUGE = "modelmesh_autoscaler_runtime_warming_up"


class StepSource(SourceDefaults):
    """Four pods at 20 req/s and GPU 0.2; `down` names pods whose exporter does not answer."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.present = True

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        if not self.present:
            return []
        pods = tuple(PodSample(f"pod-{i}", sampled_at=None if f"pod-{i}" in self.down else now - 1,
                               gpu_busy=0.2, requests_per_second=20.0, queue_delay_s=0.0)
                     for i in range(4))
        return [RuntimeSnapshot(KEY, pods, now, replicas=4)]

    async def close(self) -> None:
        return None


def gauge(metrics: AdapterMetrics) -> float | None:
    values = [sample.value for family in metrics.registry.collect() for sample in family.samples
              if family.name == GAUGE and sample.labels.get("deployment") == KEY.deployment]
    return values[0] if values else None


async def test_the_loop_warms_up_a_runtime_it_has_no_memory_of_and_says_so() -> None:
    clock = [1_700_000_000.0]
    source = StepSource()
    source.down = {"pod-0"}
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=30.0)), metrics, clock=lambda: clock[0],
                          monotonic=lambda: clock[0])

    await refresher.refresh_once()
    view = refresher.views[KEY]
    assert not view.known and "pod-0" in view.warming_up and gauge(metrics) == 1.0

    clock[0] += 30.0  # the grace period over, pod-0 still down: the recommendation only, at the 4 that run
    await refresher.refresh_once()
    view = refresher.views[KEY]
    assert view.known and view.values[ServedMetric.DESIRED_REPLICAS].value == 4.0
    assert view.values[ServedMetric.REQUEST_LOAD].value is None  # 3 x 20 from the others, below 4 x 20
    assert "requests not fresh on pod-0" in view.warming_up and gauge(metrics) == 1.0

    clock[0] += 15.0
    source.down = set()  # the exporter is back: warm, served in full, never below the 4 replicas that run
    await refresher.refresh_once()
    view = refresher.views[KEY]
    assert view.known and view.warming_up == "" and gauge(metrics) == 0.0
    assert view.values[ServedMetric.DESIRED_REPLICAS].value == 4.0  # 4 x 0.2 / 0.8 = 1 alone

    clock[0] += 15.0
    source.down = {"pod-0"}  # with memory now: the usual hold, not a warm-up
    await refresher.refresh_once()
    assert refresher.views[KEY].warming_up == "" and refresher.views[KEY].known

    source.present = False
    await refresher.refresh_once()
    assert gauge(metrics) is None


class UnreadLoadSource(SourceDefaults):
    """Three pods: pod-0 and pod-1 with a fresh GPU reading and no ModelMesh load ever read (their exporters
    answer but cannot read ModelMesh); pod-2's exporter does not answer at all."""

    name = "test"
    errors: dict[str, int] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = (*(PodSample(f"pod-{i}", gpu_busy=0.2, gpu_sampled_at=now - 1) for i in range(2)),
                PodSample("pod-2"))
        return [RuntimeSnapshot(KEY, pods, now, replicas=3)]

    async def close(self) -> None:
        return None


async def test_the_warm_up_line_names_the_load_a_pod_lacks_not_no_data(caplog: pytest.LogCaptureFixture) -> None:
    """Was: `pod-0: no data` for a pod whose GPU reading is fresh (only its ModelMesh load is missing), and
    `pod-2: gpu stale` for a pod whose exporter does not answer, as if its load were there."""
    clock = [1_700_000_000.0]
    refresher = Refresher(UnreadLoadSource(), PolicyBook(RuntimePolicy(warmup_grace_s=30.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    [line] = [record.getMessage() for record in caplog.records if record.name == "autoscaler.refresher"]
    assert "no data" not in line, line
    assert "(pod-0: no request load; pod-1: no request load; pod-2: gpu stale, no request load)" in line, line
