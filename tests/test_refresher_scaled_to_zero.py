"""A runtime scaled to zero (its Deployment asks for 0 replicas; modelmesh-serving does this to every runtime
no InferenceService uses, by default) is not a data problem: its HPA still gets a 503 that says why, but its
own `/metrics` shows no miss and no unknown values for the data alerts to fire on, and when it has pods again
it warms up afresh rather than resuming values from before it went idle (`autoscaler.policies.warmup`)."""

from __future__ import annotations

import json
import logging

import pytest

from autoscaler.api.handlers import metric_answers
from autoscaler.api.snapshot import METRICS
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-mlserver")


class IdleSource(SourceDefaults):
    """The runtime's Deployment asks for `replicas`; `pods` of them are Ready, each at 60 req/s and GPU 0.6
    (`fresh` of them with fresh data)."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self, replicas: int, pods: int) -> None:
        self.replicas, self.pods, self.fresh = replicas, pods, pods

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(f"pod-{i}", sampled_at=now - 1 if i < self.fresh else None, gpu_busy=0.6,
                               requests_per_second=60.0, queue_delay_s=0.0)
                     for i in range(self.pods))
        return [RuntimeSnapshot(KEY, pods, now, replicas=self.replicas)]

    async def close(self) -> None:
        return None


def series(metrics: AdapterMetrics, name: str) -> float | None:
    values = [sample.value for family in metrics.registry.collect() for sample in family.samples
              if sample.name == name and sample.labels.get("deployment") == KEY.deployment]
    return values[0] if values else None


def answers(refresher: Refresher) -> dict[str, tuple[int, str]]:
    """What the API answers for each metric: status code and the value or the message."""
    result = {}
    for metric, (code, body, _) in zip(METRICS, metric_answers(refresher.views[KEY], METRICS), strict=True):
        document = json.loads(body)
        result[metric.value] = (code, document["items"][0]["value"] if code == 200 else document["message"])
    return result


async def test_a_runtime_scaled_to_zero_answers_503_but_raises_no_data_alarm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [1_700_000_000.0]
    source = IdleSource(replicas=3, pods=3)
    metrics = AdapterMetrics()
    policy = RuntimePolicy(warmup_grace_s=30.0, scale_down_tau_s=300.0)
    refresher = Refresher(source, PolicyBook(policy), metrics, clock=lambda: clock[0], monotonic=lambda: clock[0])
    await refresher.refresh_once()
    # 3 pods at GPU 0.6 against the 0.8 target: 2.25 pods of demand, never below the 3 that run while warm.
    assert answers(refresher)[ServedMetric.DESIRED_REPLICAS.value] == (200, "3000m")

    clock[0] += 15.0
    source.replicas, source.pods = 0, 0  # the last InferenceService deleted: modelmesh-serving scales to zero
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    for _ in range(10):  # more refreshes than the 8 misses the shipped ModelMeshRuntimeDataMissing alerts on
        await refresher.refresh_once()
        clock[0] += 15.0
    code, message = answers(refresher)[ServedMetric.DESIRED_REPLICAS.value]
    assert code == 503 and "scaled to zero" in message and "HPA holds" in message
    assert series(metrics, "modelmesh_autoscaler_runtime_consecutive_misses") == 0.0
    assert series(metrics, "modelmesh_autoscaler_runtime_values_known") is None  # nothing to alert on
    assert series(metrics, "modelmesh_autoscaler_runtime_warming_up") == 0.0
    said = [record for record in caplog.records if KEY.deployment in record.getMessage()]
    assert [(r.levelno, "scaled to zero" in r.getMessage()) for r in said] == [(logging.INFO, True)]  # once

    # An InferenceService again: the Deployment asks for 2, which start with one pod's exporter not up yet.
    # The runtime warms up as if new: nothing is served from one pod of two.
    source.replicas, source.pods, source.fresh = 2, 2, 1
    await refresher.refresh_once()
    code, message = answers(refresher)[ServedMetric.DESIRED_REPLICAS.value]
    assert code == 503 and "warming up" in message
    assert series(metrics, "modelmesh_autoscaler_runtime_values_known") == 0.0
    assert series(metrics, "modelmesh_autoscaler_runtime_warming_up") == 1.0

    clock[0] += 15.0
    source.fresh = 2  # both fresh: 2 x 0.6 / 0.8 = 1.5, but never below the 2 the Deployment asks for
    await refresher.refresh_once()
    assert answers(refresher)[ServedMetric.DESIRED_REPLICAS.value] == (200, "2000m")
    assert series(metrics, "modelmesh_autoscaler_runtime_values_known") == 1.0
