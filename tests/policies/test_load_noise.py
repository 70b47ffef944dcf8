"""The need two pods may stand apart by load noise alone (`load_noise_need`): what the ranking hold takes for a
turn of the ranking after `modelmesh_desired_replicas` fell, and writes at once rather than at each pod's minute.

The promises, over any need weights, against the real decision's needs: pods whose load terms lie within a
factor of three of each other (ordinary noise: 25 to 75 req/s) never stand apart by more than it, whatever the
weights and whichever terms the exporters report, so noise is written at the minute (hurrying it sent two thirds
more PATCHes); and the load moved wholly onto one pod always does, so that turn is written at once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeSnapshot
from autoscaler.policies.decision import decide
from autoscaler.policies.load_noise import load_noise_need
from autoscaler.policies.policy import RuntimePolicy
from tests.policies.builders import KEY, NOW, PROPERTIES, pod

WEIGHT = st.floats(min_value=0.0, max_value=4.0)


@st.composite
def policies(draw: st.DrawFn, requests: bool = False) -> RuntimePolicy:
    return RuntimePolicy(
        target_rps_per_pod=100.0,
        need_weight_requests=draw(st.floats(min_value=0.1, max_value=4.0) if requests else WEIGHT),
        need_weight_gpu=draw(WEIGHT), need_weight_cache=draw(WEIGHT), need_weight_unique=draw(WEIGHT))


def needs(policy: RuntimePolicy, loads: list[tuple[float, float | None]],
          cache: float | None) -> tuple[list[float], float]:
    """The decision's needs of pods at these (req/s, GPU busy), each with the same cache fill, and the noise."""
    snapshot = RuntimeSnapshot(KEY, tuple(pod(f"pod-{i}", rps=rps, gpu=gpu, cache=cache, lru=900.0, models=3.0)
                                          for i, (rps, gpu) in enumerate(loads)), NOW, replicas=len(loads))
    view, _ = decide(snapshot, policy, None, NOW, 30.0)
    found = [p.need for p in view.pods]
    assert None not in found, view.pods
    return [n for n in found if n is not None], load_noise_need(policy, view)


@PROPERTIES
@given(policy=policies(), pods=st.integers(min_value=2, max_value=6), data=st.data(),
       rate=st.floats(min_value=1.0, max_value=500.0), gpu=st.one_of(st.none(), st.floats(0.01, 1 / 3)),
       cache=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_load_noise_never_puts_two_pods_further_apart_than_the_slack(
        policy: RuntimePolicy, pods: int, data: st.DataObject, rate: float, gpu: float | None,
        cache: float | None) -> None:
    within = st.floats(min_value=1.0, max_value=3.0)
    loads = [(rate * data.draw(within), None if gpu is None else gpu * data.draw(within)) for _ in range(pods)]
    found, slack = needs(policy, loads, cache)
    assert max(found) - min(found) <= slack + 1e-9, (loads, found, slack)


@PROPERTIES
@given(policy=policies(requests=True), pods=st.integers(min_value=2, max_value=6),
       rate=st.floats(min_value=1.0, max_value=500.0), cache=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_the_load_moved_onto_one_pod_is_beyond_the_slack(
        policy: RuntimePolicy, pods: int, rate: float, cache: float | None) -> None:
    busy: tuple[float, float | None] = (rate, None)
    idle: tuple[float, float | None] = (0.0, None)
    loads = [busy] + [idle] * (pods - 1)
    found, slack = needs(policy, loads, cache)
    assert found[0] - max(found[1:]) > slack, (loads, found, slack)
