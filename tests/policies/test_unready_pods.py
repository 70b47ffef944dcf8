"""A hot pod that fails its readiness probe is missing data, not zero load (reviewer finding rv2 #2).

Pods at 400, 20 and 20 req/s with 100 req/s a pod: 7 replicas. The hot pod's probe times out under load and it is
not Ready for a refresh: left out, the runtime read 40 req/s and 1 replica (with `scale_down_tau_s` 0), and the
scale-down that followed removed the not-Ready pod first, the hot one. Each test decides refresh after refresh as
the refresher does, with the hot pod's last good sample held as the scrape source holds it (not scraped while not
Ready), and checks what the HPA is served and what /debug's view says.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.unready_pods import NOT_READY_HOLD_S
from tests.policies.builders import NOW, PROPERTIES, pod, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
LOAD = ServedMetric.REQUEST_LOAD
FAST = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0)  # no smoothing: any fall shows at once
LOGGER = "autoscaler.policies.unready_pods"


def sampled(name: str, rps: float, at: float) -> PodSample:
    """A Ready pod scraped at `at` (5 s old then)."""
    return pod(name, rps=rps, queue=0.0, cache=0.5, lru=900.0, models=3.0, now=at)


def not_ready(sample: PodSample, since: float | None) -> PodSample:
    """The pod not Ready, with its last good sample held; `since` None: discovery gives no time (it was never
    seen Ready, or it is terminating)."""
    return replace(sample, ready=False, unready_since=since)


def runtime(at: float, hot: PodSample | None = None) -> tuple[PodSample, ...]:
    return (hot or sampled("hot", 400.0, at), sampled("c1", 20.0, at), sampled("c2", 20.0, at))


def served(view: RuntimeView, metric: ServedMetric) -> float | None:
    return view.values[metric].value


def test_the_hot_pod_failing_its_probe_holds_the_replicas_and_says_so() -> None:
    first, memory = decide(snapshot(runtime(NOW)), FAST, None, NOW, 30.0)
    assert served(first, DESIRED) == 7.0
    last_good = sampled("hot", 400.0, NOW)

    view, memory = decide(snapshot(runtime(NOW + 15, not_ready(last_good, NOW + 10))), FAST, memory, NOW + 15, 30.0)

    assert served(view, DESIRED) == 7.0
    assert served(view, LOAD) == pytest.approx(served(first, LOAD))
    assert "was serving 400 req/s" in view.held["pod hot"]
    assert "not ready for 5 s" in view.held["pod hot"]
    assert not view.complete
    hot = next(row for row in view.pods if row.name == "hot")
    assert (hot.ready, hot.fresh) == (False, True)  # /debug: not Ready, its last sample counted while fresh
    assert "pod hot held: not ready" in view.reason

    # Not Ready for a minute: its sample is stale (over max_staleness_s), so it is a stale pod, holding.
    view, memory = decide(snapshot(runtime(NOW + 70, not_ready(last_good, NOW + 10))), FAST, memory, NOW + 70, 30.0)
    assert served(view, DESIRED) == 7.0
    assert dict(next(row for row in view.pods if row.name == "hot").signals)["requests"] == "stale"

    # Ready again: served as before, nothing held.
    view, memory = decide(snapshot(runtime(NOW + 85)), FAST, memory, NOW + 85, 30.0)
    assert (served(view, DESIRED), view.held) == (7.0, {})


def test_the_values_may_still_rise_while_a_pod_is_held() -> None:
    _, memory = decide(snapshot(runtime(NOW)), FAST, None, NOW, 30.0)
    hot = not_ready(sampled("hot", 400.0, NOW), NOW + 10)
    busier = (hot, sampled("c1", 300.0, NOW + 15), sampled("c2", 300.0, NOW + 15))
    view, _ = decide(snapshot(busier), FAST, memory, NOW + 15, 30.0)
    all_ready, _ = decide(snapshot((sampled("hot", 400.0, NOW + 15), *busier[1:])), FAST, None, NOW + 15, 30.0)
    assert served(view, DESIRED) == served(all_ready, DESIRED) == 11.0  # the held pod's last 400 req/s counts


def test_past_the_bound_the_pod_is_left_out_said_once(caplog: pytest.LogCaptureFixture) -> None:
    _, memory = decide(snapshot(runtime(NOW)), FAST, None, NOW, 30.0)
    hot = not_ready(sampled("hot", 400.0, NOW), NOW + 10)
    at = NOW + 10 + NOT_READY_HOLD_S - 5
    view, memory = decide(snapshot(runtime(at, hot)), FAST, memory, at, 30.0)
    assert served(view, DESIRED) == 7.0

    with caplog.at_level(logging.INFO, logger=LOGGER):
        for step in (1, 2):
            at = NOW + 10 + NOT_READY_HOLD_S + 15 * step
            view, memory = decide(snapshot(runtime(at, hot)), FAST, memory, at, 30.0)
            assert served(view, DESIRED) == 1.0  # left out, as a pod that serves nothing: 40 req/s
            assert "pod hot" not in view.held
    [line] = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    assert "pod hot not ready for 315 s (over 300 s): left out of the values" in line


@pytest.mark.parametrize("hot", [
    not_ready(sampled("hot", 400.0, NOW), None),  # terminating (discovery gives no time): the ReplicaSet's gone
    replace(sampled("hot", 400.0, NOW), ready=False, sampled_at=None),  # starting, never Ready: nothing read
], ids=["terminating", "never-ready"])
def test_a_pod_terminating_or_never_ready_is_left_out_at_once(hot: PodSample) -> None:
    _, memory = decide(snapshot(runtime(NOW)), FAST, None, NOW, 30.0)
    view, _ = decide(snapshot(runtime(NOW + 15, hot)), FAST, memory, NOW + 15, 30.0)
    assert served(view, DESIRED) == 1.0
    assert view.held == {}


@PROPERTIES
@given(
    rates=st.lists(st.floats(0.0, 1000.0), min_size=1, max_size=4),
    flaps=st.lists(st.tuples(st.lists(st.booleans(), min_size=4, max_size=4), st.floats(0.0, 14.9)),
                   min_size=1, max_size=18),
)
def test_ready_flaps_within_the_bound_never_lower_the_served_values(
    rates: list[float], flaps: list[tuple[list[bool], float]]
) -> None:
    """All Ready first; then each refresh (15 s apart, all within NOT_READY_HOLD_S) any pod may be not Ready, since
    some time before that refresh, its last sample the one from when it was last Ready. With no smoothing, the
    replicas and the load served are never below what the same pods served all Ready (or unknown: 503)."""
    names = [f"pod-{i}" for i in range(len(rates))]
    last_good = {name: sampled(name, rate, NOW) for name, rate in zip(names, rates, strict=True)}
    first, memory = decide(snapshot(tuple(last_good.values())), FAST, None, NOW, 30.0)
    floor = {metric: served(first, metric) for metric in (DESIRED, LOAD)}
    since: dict[str, float] = {}
    for step, (ready, offset) in enumerate(flaps, start=1):
        at = NOW + 15.0 * step
        pods = []
        for name, rate, is_ready in zip(names, rates, ready, strict=False):
            if is_ready:
                since.pop(name, None)
                last_good[name] = sampled(name, rate, at)
                pods.append(last_good[name])
            else:
                since.setdefault(name, at - offset)
                pods.append(not_ready(last_good[name], since[name]))
        view, memory = decide(snapshot(tuple(pods)), FAST, memory, at, 30.0)
        for metric, lowest in floor.items():
            value = served(view, metric)
            assert value is None or lowest is None or value >= lowest - 1e-9 * max(1.0, lowest), (
                step, metric, value, lowest, view.reason)
            assert value is None or math.isfinite(value)


def test_a_value_held_for_a_pod_not_ready_says_so_not_data_missing_on_a_ready_pod() -> None:
    """An operator's churn runs logged `10/10 ready pods fresh; modelmesh_desired_replicas held: data missing on
    some ready pod; ...; pod X held: not ready for 5 s`: every Ready pod was fresh, the value was held for the pod
    not Ready. The held value's reason names that pod's hold."""
    _, memory = decide(snapshot(runtime(NOW)), FAST, None, NOW, 30.0)
    quieter = (sampled("hot", 100.0, NOW + 15), sampled("c1", 20.0, NOW + 15),
               not_ready(sampled("c2", 20.0, NOW), NOW + 10))
    view, _ = decide(snapshot(quieter), FAST, memory, NOW + 15, 30.0)

    raw, value = view.values[DESIRED].raw, view.values[DESIRED].value
    assert raw is not None and value is not None and raw < value  # held up
    for metric in (DESIRED.value, LOAD.value):
        assert "ready pod" not in view.held[metric], view.held
        assert "pod not Ready held" in view.held[metric], view.held
