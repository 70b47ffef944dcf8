"""The leader's `modelmesh_autoscaler_runtime_scale_not_ready{reason}`: the RuntimeScale's Ready reason, one series
per RuntimeScale while it is not Ready, so that the shipped `ModelMeshRuntimeScaleNotReady` can name the reason
and leave out a runtime scaled to zero (manifests/examples/prometheus/rules.yaml)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.actuation.bridge_status import AUTOSCALER_CLASS_ANNOTATION
from autoscaler.kube.client import KubeClient
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"
NOT_READY = "modelmesh_autoscaler_runtime_scale_not_ready"
READY = "modelmesh_autoscaler_runtime_scale_ready"


def scraped(metrics: AdapterMetrics) -> dict[str, dict[tuple[str, ...], float]]:
    """The RuntimeScale families as /metrics serves them: name -> (runtimescale[, reason]) -> value."""
    found: dict[str, dict[tuple[str, ...], float]] = {READY: {}, NOT_READY: {}}
    for family in text_string_to_metric_families(metrics.runtime_exposition().decode()):
        for sample in family.samples:
            if sample.name in found:
                key = (sample.labels["runtimescale"], *([sample.labels["reason"]] if "reason" in sample.labels else []))
                found[sample.name][key] = sample.value
    return found


async def test_the_reason_follows_the_ready_condition_one_series_at_a_time(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    metrics = AdapterMetrics()
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0, metrics=metrics)
    kube.add_runtime_scale(NS, "triton", replicas=2)
    kube.add_runtime_scale(NS, "idle")
    kube.add_serving_runtime(NS, "idle")
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-idle", replicas=0)  # scaled to zero

    async def step(change: Callable[[], Any] | None = None) -> dict[str, dict[tuple[str, ...], float]]:
        if change is not None:
            change()
        clock.advance(60)
        await bridge.sync()
        return scraped(metrics)

    seen = await step()
    assert seen[NOT_READY] == {("triton", "ServingRuntimeNotFound"): 1, ("idle", "NoReplicas"): 1}
    assert seen[READY] == {("triton",): 0, ("idle",): 0}

    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=1)
    seen = await step(lambda: kube.add_serving_runtime(NS, "triton", annotations={AUTOSCALER_CLASS_ANNOTATION: "hpa"}))
    assert seen[NOT_READY] == {("triton", "AutoscalerClassConflict"): 1, ("idle", "NoReplicas"): 1}

    def plain(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"].pop(AUTOSCALER_CLASS_ANNOTATION)

    seen = await step(lambda: kube.update_object("servingruntimes", NS, "triton", plain))
    assert seen[NOT_READY] == {("idle", "NoReplicas"): 1}  # Ready: no series
    assert seen[READY] == {("triton",): 1, ("idle",): 0}

    seen = await step(lambda: kube.delete_object("runtimescales", NS, "idle"))
    assert seen == {READY: {("triton",): 1}, NOT_READY: {}}


REASONS = st.sampled_from(["Bridged", "NoReplicas", "DuplicateRuntimeScale", "AutoscalerClassConflict"])
STEPS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.tuples(st.booleans(), REASONS))),
                 max_size=30)


@given(STEPS)
def test_one_series_per_runtime_scale_with_its_last_reason(steps: list[tuple[str, tuple[bool, str] | None]]) -> None:
    """Whatever order conditions come and go in (None: the RuntimeScale is forgotten), each RuntimeScale has at
    most one not-Ready series, with the reason last set, and none once Ready or gone."""
    metrics = AdapterMetrics()
    last: dict[str, tuple[bool, str]] = {}
    for name, condition in steps:
        if condition is None:
            metrics.forget_runtime_scale(NS, name)
            last.pop(name, None)
        else:
            metrics.set_runtime_scale_ready(NS, name, *condition)
            last[name] = condition
    seen = scraped(metrics)
    assert seen[NOT_READY] == {(name, reason): 1 for name, (ready, reason) in last.items() if not ready}
    assert seen[READY] == {(name,): 1 if ready else 0 for name, (ready, _) in last.items()}
