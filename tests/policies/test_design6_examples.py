"""DESIGN §6 by hand: the built-in defaults, `max_staleness` following the refresh interval, and the edges of
each condition (`q_i > target`, `c_i < cache_full_ratio`, "fewer than `min_coverage`"), served through the
decision's entry point (`decide`) or the policy the adapter builds from its settings (`server.policy_book`).

Every expected number is worked out in the comment beside it, never with the code's formula.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.server import policy_book
from autoscaler.settings import ServeSettings
from tests.policies.builders import KEY, NOW, pod, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
CACHE_PRESSURE = ServedMetric.CACHE_PRESSURE
WINDOW = 30.0


def served(view: RuntimeView, metric: ServedMetric = DESIRED) -> float | None:
    return view.values[metric].value


# --- the built-in defaults (§6's config block: "these values are the built-in defaults") ---------------
# All but `queue_drain_s`: §6 lists 15, the adapter ships 60, chosen with the simulator (15 cost 1.24x and 1.27x
# mean-hpa's pod-hours on bursty traces, 60 1.13x; docs/simulation.md, "What each missed shape says").

DESIGN_DEFAULTS = {
    "skew_order": 2,
    "target_gpu_busy": 0.8,
    "target_rps_per_pod": None,
    "target_queue_delay_s": 0.05,
    "target_lru_age_s": 600,
    "cache_full_ratio": 0.9,
    "cache_pressure_cap": 1.2,
    "scale_down_tau_s": 300,
    "min_replicas": None,
    "max_replicas": None,
    "min_coverage": 0.5,  # "min_coverage (default 0.5)"
}


@pytest.mark.parametrize(("key", "value"), DESIGN_DEFAULTS.items(), ids=list(DESIGN_DEFAULTS))
def test_a_policy_nobody_configured_has_the_designs_defaults(key: str, value: object) -> None:
    policy = policy_book(ServeSettings()).policy_for(KEY)
    assert getattr(policy, key) == value


@pytest.mark.parametrize(("refresh", "staleness"), [(15.0, 45.0), (5.0, 15.0), (60.0, 180.0)],
                         ids=["default_15s", "5s", "60s"])
def test_max_staleness_defaults_to_three_refresh_intervals(refresh: float, staleness: float) -> None:
    """§6: `max_staleness` (default 3 x refresh interval); 3 x 5 s = 15 s, 3 x 60 s = 180 s."""
    policy = policy_book(ServeSettings(refresh_interval_s=refresh)).policy_for(KEY)
    assert policy.max_staleness_s == staleness


def test_with_a_5s_refresh_a_pod_20s_old_is_stale_and_holds_the_recommendation(tmp_path: Path) -> None:
    """With `--refresh-interval 5` and a policy file that does not set it, max_staleness is 15 s: a pod
    last sampled 20 s ago is stale. 4 pods at GPU busy 1.0 ask for 4/0.8 = 5; then 3 of them idle and the
    4th goes 20 s stale: 0 from the fresh ones, but with a pod missing the 5 is held (no scale-down)."""
    config = tmp_path / "policy.yaml"
    config.write_text("defaults:\n  scale_down_tau_s: 0\n")
    policy = policy_book(ServeSettings(refresh_interval_s=5.0, config=config)).policy_for(KEY)
    view, memory = decide(snapshot(tuple(pod(f"p{j}", gpu=1.0) for j in range(4))), policy, None, NOW, WINDOW)
    assert served(view) == 5.0
    later = NOW + 5.0
    pods = (*(pod(f"p{j}", gpu=0.0, now=later, age=1.0) for j in range(3)), pod("p3", gpu=1.0, now=later, age=20.0))
    view, memory = decide(snapshot(pods, now=later), policy, memory, later, WINDOW)
    assert (view.ready_pods, view.fresh_pods) == (4, 3)
    assert served(view) == 5.0


# --- the recommendation, by hand --------------------------------------------------------------------

def test_skewed_gpu_load_worked_by_hand() -> None:
    """b = [1.0, 0.6, 0.2, 0.2]: sum of squares 1 + 0.36 + 0.04 + 0.04 = 1.44, / 4 = 0.36, sqrt = 0.6;
    4 x 0.6 / 0.8 = 3 pods exactly (float fuzz must not make it 4; the plain mean, 0.5, would ask for 2.5)."""
    pods = tuple(pod(f"p{j}", gpu=b) for j, b in enumerate([1.0, 0.6, 0.2, 0.2]))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert served(view) == 3.0
    assert view.proposals["gpu"] == 3


def test_request_term_worked_by_hand_and_the_larger_term_wins() -> None:
    """r = [100, 60, 20, 20] at 50 per pod: squares 10000 + 3600 + 400 + 400 = 14400, / 4 = 3600, sqrt = 60;
    4 x 60 / 50 = 4.8 -> 5, above the GPU term's 3 (as above)."""
    pods = tuple(pod(f"p{j}", gpu=b, rps=r) for j, (b, r) in enumerate(zip([1.0, 0.6, 0.2, 0.2],
                                                                             [100.0, 60.0, 20.0, 20.0], strict=True)))
    view, _ = decide(snapshot(pods), RuntimePolicy(target_rps_per_pod=50.0), None, NOW, WINDOW)
    assert (served(view), view.winner) == (5.0, "requests")
    assert (view.proposals["requests"], view.proposals["gpu"]) == (5, 3)


def test_queue_term_adds_the_excess_over_the_drain_time_on_top_of_the_demand() -> None:
    """GPU demand 3 (as above), queues [6.05, 0.05, 0, 0] s with target 0.05 and drain 15 s: the excess is
    6.05 - 0.05 = 6 pod-s (the pod exactly at the target is not saturated and adds nothing); 6 / 15 = 0.4;
    3 + 0.4 = 3.4 -> 4."""
    pods = tuple(pod(f"p{j}", gpu=b, queue=q) for j, (b, q) in enumerate(zip([1.0, 0.6, 0.2, 0.2],
                                                                               [6.05, 0.05, 0.0, 0.0], strict=True)))
    view, _ = decide(snapshot(pods), RuntimePolicy(queue_drain_s=15.0), None, NOW, WINDOW)
    assert (served(view), view.winner) == (4.0, "queue")


def test_a_queue_exactly_at_its_target_is_not_saturated() -> None:
    """`while some q_i > target_queue_delay`: 4 pods at exactly 0.05 s propose nothing; GPU 4 x 0.4 / 0.8 = 2."""
    pods = tuple(pod(f"p{j}", gpu=0.4, queue=0.05) for j in range(4))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert view.proposals["queue"] is None
    assert served(view) == 2.0


def test_a_cache_exactly_at_the_full_ratio_is_full() -> None:
    """`c_i < cache_full_ratio` has room, so 0.9 is full. LRU ages [300, 200, 100, 50]: A = 300, pressure
    600 / 300 = 2, capped at 1.2: 4 x 1.2 = 4.8 -> 5 pods; the served cache pressure is 2."""
    pods = tuple(pod(f"p{j}", gpu=0.1, cache=0.9, lru=a, models=3.0) for j, a in enumerate([300.0, 200.0, 100.0, 50.0]))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert (served(view), view.winner) == (5.0, "cache")
    assert served(view, CACHE_PRESSURE) == 2.0


def test_one_pod_holding_no_model_gives_the_runtime_room() -> None:
    """The same runtime with a fifth pod that holds no model: the runtime has room, pressure 0, no cache term;
    GPU 5 x 0.1 / 0.8 = 0.625 -> 1."""
    pods = (*(pod(f"p{j}", gpu=0.1, cache=0.9, lru=a, models=3.0) for j, a in enumerate([300.0, 200.0, 100.0, 50.0])),
            pod("empty", gpu=0.1, cache=0.95, lru=300.0, models=0.0))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert served(view, CACHE_PRESSURE) == 0.0
    assert view.proposals["cache"] is None
    assert served(view) == 1.0


@pytest.mark.parametrize(("stale", "known"), [(0, True), (2, True), (3, False)],
                         ids=["all_fresh", "half_fresh_is_enough", "quarter_fresh_is_unknown"])
def test_fewer_than_min_coverage_of_the_ready_pods_fresh_is_unknown(stale: int, known: bool) -> None:
    """4 Ready pods, min_coverage 0.5: 2 fresh is 0.5, not fewer, so served; 1 fresh (0.25) is unknown (503)."""
    pods = tuple(pod(f"p{j}", gpu=0.8, rps=10.0, queue=0.0, cache=0.5, models=1.0,
                     age=300.0 if j < stale else 3.0) for j in range(4))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert view.known is known
    assert (served(view) is not None) is known


def test_not_ready_pods_are_left_out() -> None:
    """2 Ready pods at 0.8 and 3 not Ready ones at 1.0: 2 x 0.8 / 0.8 = 2, as if the others did not exist."""
    pods = (*(pod(f"r{j}", gpu=0.8) for j in range(2)), *(pod(f"n{j}", gpu=1.0, ready=False) for j in range(3)))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.ready_pods, served(view)) == (2, 2.0)


# --- slow scale-down: up at once, down with time constant tau -----------------------------------------

def test_a_fall_from_10_to_2_pods_follows_tau_and_a_rise_is_at_once() -> None:
    """8 pods at GPU 1.0: 8 / 0.8 = 10. Load falls to 0.2: target 8 x 0.2 / 0.8 = 2. With tau 300 s, one
    refresh 300 s later serves 2 + 8/e = 4.94 -> 5; 300 s more, 2 + 8/e^2 = 3.08 -> 4. Load back: 10 at once."""
    policy = RuntimePolicy(scale_down_tau_s=300.0)
    memory: RuntimeMemory | None = None
    seen = []
    for at, busy in [(0.0, 1.0), (300.0, 0.2), (600.0, 0.2), (615.0, 1.0)]:
        now = NOW + at
        view, memory = decide(snapshot(tuple(pod(f"p{j}", gpu=busy, now=now) for j in range(8)), now=now),
                              policy, memory, now, WINDOW)
        seen.append(served(view))
    assert seen == [10.0, 5.0, 4.0, 10.0]
    assert memory is not None and math.isclose(memory.smoothed[DESIRED].value, 10.0)


def test_the_policy_for_a_runtime_named_in_the_file_keeps_the_staleness_the_flags_gave(tmp_path: Path) -> None:
    """A runtime entry that sets another key leaves max_staleness at 3 x 5 s = 15 s."""
    config = tmp_path / "policy.yaml"
    config.write_text("runtimes:\n  - {namespace: ml, deployment: modelmesh-serving-triton, target_rps_per_pod: 120}\n")
    book = policy_book(ServeSettings(refresh_interval_s=5.0, config=config))
    policy = book.policy_for(RuntimeKey("ml", "modelmesh-serving-triton"))
    assert (policy.target_rps_per_pod, policy.max_staleness_s) == (120.0, 15.0)
