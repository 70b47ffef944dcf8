"""The /debug bytes rendered each refresh are exactly `json.dumps(explanation(view))`, however they are made.

`debug_body` skips `jsonable`'s per-value inspection where `json.dumps` writes a value the same way, and takes
the generic path when it cannot (a NaN, an infinity): the bytes a user fetches must not depend on which.
"""

from __future__ import annotations

import dataclasses
import json
import math

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.debug_document import explanation
from autoscaler.model import PodSample, RuntimeSnapshot, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.samples import clean_sample
from tests.api.builders import KEY, NOW
from tests.policies.builders import PROPERTIES
from tests.support.debug_answers import debug_body

reading = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e3), st.sampled_from([math.nan, -1.0]))


@st.composite
def pods(draw: st.DrawFn) -> PodSample:
    age = draw(st.one_of(st.none(), st.floats(min_value=-5.0, max_value=100.0)))
    return clean_sample(PodSample(  # garbled readings made absent, as every source hands them over (`PodSample`)
        name=draw(st.text(max_size=8)),  # any text: quotes, backslashes, non-ASCII must be escaped alike
        ready=draw(st.booleans()),
        sampled_at=None if age is None else NOW - age,
        gpu_busy=draw(reading),
        requests_per_second=draw(reading),
        queue_delay_s=draw(reading),
        lru_age_s=draw(reading),
        cache_used_ratio=draw(reading),
    ))


@PROPERTIES
@given(steps=st.lists(st.lists(pods(), max_size=6).map(tuple), min_size=1, max_size=3),
       rps_target=st.sampled_from([None, 40.0]))
def test_debug_bytes_are_the_explanation_as_json(steps: list[tuple[PodSample, ...]],
                                                  rps_target: float | None) -> None:
    memory = None
    book = PolicyBook(defaults=RuntimePolicy(target_rps_per_pod=rps_target))
    policy = book.policy_for(KEY, {"autoscaler.modelmesh.io/max-replicas": "9"})
    for i, pods_now in enumerate(steps):
        now = NOW + 15.0 * i
        view, memory = decide(RuntimeSnapshot(KEY, pods_now, now), policy, memory, now, 30.0)
        assert debug_body(view) == json.dumps(explanation(view)).encode()
        assert debug_body(view, book.explain(KEY)) == json.dumps(explanation(view, book.explain(KEY))).encode()


def test_a_non_finite_number_is_null_in_the_debug_bytes_too() -> None:
    view, _ = decide(RuntimeSnapshot(KEY, (PodSample("p", sampled_at=NOW, gpu_busy=0.5),), NOW),
                     RuntimePolicy(), None, NOW, 30.0)
    odd = dataclasses.replace(view, coverage=math.nan,
                              values={**view.values, ServedMetric.GPU_BUSY: ServedValue(math.inf, 0.5, NOW)})
    body = debug_body(odd)
    assert body == json.dumps(explanation(odd)).encode()
    document = json.loads(body)
    assert document["coverage"] is None
    assert document["values"]["modelmesh_gpu_busy"] == {"value": None, "raw": 0.5, "timestamp": NOW}


@PROPERTIES
@given(steps=st.lists(st.tuples(st.lists(pods(), max_size=6, unique_by=lambda pod: pod.name).map(tuple),
                                st.none() | st.integers(0, 6),
                                st.lists(st.booleans(), min_size=6, max_size=6)), min_size=1, max_size=3),
       step_s=st.sampled_from([15.0, 200.0]))
def test_the_pods_counted_otherwise_are_written_as_the_explanation_says(
        steps: list[tuple[tuple[PodSample, ...], int | None, list[bool]]], step_s: float) -> None:
    """Pods held not Ready, Ready pods left out past the hold, a rollout's surge pods: each pod's `counted` and
    `reason` are the same bytes either way, and `ready_pods` counts the pods shown `counted`."""
    memory = None
    policy = RuntimePolicy(target_rps_per_pod=40.0)
    for i, (pods_now, replicas, stopped) in enumerate(steps):
        now = NOW + step_s * i
        pods_now = tuple(dataclasses.replace(pod, unready_since=NOW) if not pod.ready and stop else pod
                         for pod, stop in zip(pods_now, stopped, strict=False))
        view, memory = decide(RuntimeSnapshot(KEY, pods_now, now, replicas=replicas), policy, memory, now, 30.0)
        body = debug_body(view)
        assert body == json.dumps(explanation(view)).encode()
        document = json.loads(body)
        counted = [pod for pod in document["pods"] if pod["counted"]]
        assert document["ready_pods"] == len(counted), (document["ready_pods"], document["pods"])
        assert all(pod["reason"] == "" for pod in document["pods"] if pod["name"] not in view.pods_counted)
