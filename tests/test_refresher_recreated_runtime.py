"""A runtime whose Deployment is deleted and created again under the same name (`kubectl delete` then `apply`, a
GitOps replace, a re-applied ServingRuntime) is another runtime: it warms up from what runs, not from the old
one's memory. The old runtime was at 4 replicas in its slow fall; the new one runs 2 pods at GPU busy 0.1 (1 pod
of demand). It was served 4 at once, with the old runtime's GPU busy, and its HPA scaled it from 2 to 4."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.debug_document import debug_json
from autoscaler.api.render import render_snapshot
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

KEY = RuntimeKey("churn", "modelmesh-serving-rtprobe")
MIN_REPLICAS = "autoscaler.modelmesh.io/min-replicas"


class DeploymentSource(SourceDefaults):
    """One runtime: its Deployment's uid, its pods (all Ready and fresh) and their GPU busy."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self, uid: str, pods: int, busy: float) -> None:
        self.uid, self.pods, self.busy = uid, pods, busy

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(f"{self.uid}-{i}", sampled_at=now - 1, gpu_busy=self.busy, requests_per_second=10.0,
                               queue_delay_s=0.0) for i in range(self.pods))
        return [RuntimeSnapshot(KEY, pods, now, replicas=self.pods, uid=self.uid)]

    async def close(self) -> None:
        return None


def served(refresher: Refresher) -> dict[ServedMetric, float | None]:
    return {metric: value.value for metric, value in refresher.views[KEY].values.items()}


async def test_a_deployment_created_again_under_the_same_name_starts_without_the_old_ones_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [1_700_000_000.0]
    source = DeploymentSource("uid-old", pods=3, busy=0.95)
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=30.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    await refresher.refresh_once()
    assert served(refresher)[ServedMetric.DESIRED_REPLICAS] == 4.0  # 3 x 0.95 / 0.8 = 3.56
    clock[0] += 15.0
    source.busy = 0.1
    await refresher.refresh_once()
    assert served(refresher)[ServedMetric.DESIRED_REPLICAS] == 4.0  # the slow fall

    clock[0] += 15.0
    source.uid, source.pods = "uid-new", 2  # deleted and created again: 2 new pods at 0.1
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    values = served(refresher)
    assert values[ServedMetric.DESIRED_REPLICAS] == 2.0  # what runs, not the old runtime's 4
    assert values[ServedMetric.GPU_BUSY] == pytest.approx(0.1)
    assert any("created again" in r.getMessage() and str(KEY) in r.getMessage() for r in caplog.records)


class AnnotatedDeployment(DeploymentSource):
    """The same runtime, its Deployment annotated (`autoscaler.modelmesh.io/min-replicas` and the like)."""

    def __init__(self, uid: str, pods: int, busy: float, annotations: dict[str, str]) -> None:
        super().__init__(uid, pods, busy)
        self.annotations = annotations

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        [snapshot] = await super().collect(now)
        return [dataclasses.replace(snapshot, annotations=dict(self.annotations))]


def debug_document(refresher: Refresher) -> dict[str, Any]:
    """/debug/runtimes/NS/DEP as the serving worker answers it from the refresh's views."""
    snapshot = render_snapshot(refresher.views, True, policies=refresher.policies)
    record = snapshot.runtimes.debug_record((KEY.namespace, KEY.deployment))
    assert record is not None
    document: dict[str, Any] = json.loads(debug_json(record))
    return document


async def test_a_bad_annotation_on_a_deployment_created_again_is_not_read_as_the_old_ones_good_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`kubectl replace --force` within one refresh: the old Deployment said `min-replicas: "3"`, the new one says
    `"3x"`. The new runtime's annotation was never good, so the built-in applies (no floor): it was served the old
    object's floor of 3 for its 2 pods, and /debug said "its last good value, '3'" until someone fixed the typo."""
    clock = [1_700_000_000.0]
    source = AnnotatedDeployment("uid-old", pods=2, busy=0.4, annotations={MIN_REPLICAS: "3"})
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=0.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    await refresher.refresh_once()
    assert debug_document(refresher)["policy"]["min_replicas"]["value"] == 3
    assert served(refresher)[ServedMetric.DESIRED_REPLICAS] == 3.0

    clock[0] += 15.0
    source.uid, source.annotations = "uid-new", {MIN_REPLICAS: "3x"}  # deleted and created again, with a typo
    caplog.set_level(logging.INFO)
    await refresher.refresh_once()
    shown = debug_document(refresher)["policy"].get("min_replicas")
    assert shown is None or (shown["value"] is None and "last good" not in shown["from"]), shown
    assert served(refresher)[ServedMetric.DESIRED_REPLICAS] == 2.0  # what runs, no floor
    ignored = [r.getMessage() for r in caplog.records if "'3x'" in r.getMessage()]
    assert ignored and all("last good" not in message for message in ignored), ignored


ANNOTATION_VALUES = st.sampled_from(["1", "3", "5", "3x", "-1", ""])
ANNOTATIONS = st.dictionaries(st.sampled_from([MIN_REPLICAS, "autoscaler.modelmesh.io/max-replicas"]),
                              ANNOTATION_VALUES, max_size=2)


@settings(max_examples=40, deadline=None)
@given(olds=st.lists(ANNOTATIONS, min_size=1, max_size=3), new=ANNOTATIONS)
async def test_a_deployment_created_again_is_served_as_by_an_adapter_that_never_saw_the_old_one(
    olds: list[dict[str, str]], new: dict[str, str],
) -> None:
    """Whatever the old Deployment's annotations were over its life, the new one's /debug policy and served value
    are those of a fresh adapter that sees only the new Deployment."""
    clock = [1_700_000_000.0]
    source = AnnotatedDeployment("uid-old", pods=2, busy=0.4, annotations={})
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=0.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    for written in olds:
        source.annotations = written
        await refresher.refresh_once()
        clock[0] += 15.0
    source.uid, source.annotations = "uid-new", new
    await refresher.refresh_once()

    fresh_source = AnnotatedDeployment("uid-new", pods=2, busy=0.4, annotations=new)
    fresh = Refresher(fresh_source, PolicyBook(RuntimePolicy(warmup_grace_s=0.0)), AdapterMetrics(),
                      clock=lambda: clock[0], monotonic=lambda: clock[0])
    await fresh.refresh_once()
    assert debug_document(refresher)["policy"] == debug_document(fresh)["policy"]
    assert served(refresher) == served(fresh)
