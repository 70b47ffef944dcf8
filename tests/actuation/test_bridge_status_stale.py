"""Every replica says which RuntimeScales' status does not answer their spec, from its own RuntimeScale watch.

Only the leader writes a RuntimeScale's status. With no leader (a Role whose `resourceNames` misses the Lease)
the HPA's writes reach nothing, and READY keeps what the last leader wrote, True; no replica published
`runtime_scale_not_ready`, so no alert named the RuntimeScale. What any replica can still see is that the status
was written for an older spec than the HPA's (the Ready condition's `observedGeneration` below
`metadata.generation`), or never: `modelmesh_autoscaler_runtime_scale_status_stale` says it, and
`ModelMeshRuntimeScaleStatusStale` names the RuntimeScale.

The promise, over any run of HPA writes, leader answers, creations and deletions (some made while the watch was
down, so that only its relist shows them): once the watch has caught up, the replica's /metrics has a series for
exactly the RuntimeScales whose last HPA ask (or creation) no leader has answered since.
"""

from __future__ import annotations

import asyncio
import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.raw import JSON
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import connected
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "ml"
NAMES = ("triton", "onnx", "mlserver")
STALE = "modelmesh_autoscaler_runtime_scale_status_stale"
STEP = st.tuples(st.sampled_from(["create", "ask", "answer", "delete", "delete_unseen"]), st.sampled_from(NAMES))


def published(metrics: AdapterMetrics) -> set[str]:
    """The RuntimeScales the replica's /metrics says are stale."""
    text = generate_latest(metrics.registry).decode()
    return {sample.labels["runtimescale"] for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == STALE and sample.value == 1}


def answer(scale: JSON) -> None:
    """The leader's status write: Ready for the spec it read."""
    generation = scale["metadata"]["generation"]
    scale["status"] = {"replicas": scale["spec"].get("replicas", 0), "observedGeneration": generation,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Bridged", "message": "...",
                                       "lastTransitionTime": "2026-12-07T05:00:00Z",
                                       "observedGeneration": generation}]}


async def run_steps(steps: list[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """(published, unanswered) once the watch has caught up with `steps`."""
    unanswered: set[str] = set()
    async with FakeKubeApi() as kube, connected(kube, NS) as client:
        metrics = AdapterMetrics()
        watch = RuntimeScaleWatch(client, NS, lambda _: None, statuses=metrics, backoff_base_s=0.01,
                                  backoff_cap_s=0.01)
        task = asyncio.create_task(watch.run())
        try:
            await kube.wait_for_watches(1, "runtimescales")
            for kind, name in steps:
                exists = kube.get("runtimescales", NS, name) is not None
                if kind == "create" and not exists:
                    kube.add_runtime_scale(NS, name, replicas=1)
                    unanswered.add(name)
                elif kind == "ask" and exists:
                    kube.update_object("runtimescales", NS, name,
                                       lambda scale: scale["spec"].update(replicas=scale["spec"]["replicas"] + 1))
                    unanswered.add(name)
                elif kind == "answer" and exists:
                    kube.update_object("runtimescales", NS, name, answer)
                    unanswered.discard(name)
                elif kind in ("delete", "delete_unseen") and exists:
                    if kind == "delete_unseen":  # the watch's connection dropped: only its relist shows it
                        kube.end_watches(abort=True)
                        kube.compact()
                    kube.delete_object("runtimescales", NS, name)
                    unanswered.discard(name)
                await asyncio.sleep(0)
            with contextlib.suppress(TimeoutError):
                await eventually(lambda: published(metrics) == unanswered, timeout=5)
            return published(metrics), unanswered
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_no_leader_answering_an_hpa_write_leaves_the_runtime_scale_stale_on_every_replica() -> None:
    seen, unanswered = await run_steps([("create", "triton"), ("answer", "triton"), ("create", "onnx"),
                                        ("answer", "onnx"), ("ask", "triton")])
    assert seen == unanswered == {"triton"}


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=10))
def test_a_replica_publishes_exactly_the_runtime_scales_whose_last_ask_nobody_answered(
        steps: list[tuple[str, str]]) -> None:
    seen, unanswered = asyncio.run(run_steps(steps))
    assert seen == unanswered, steps
