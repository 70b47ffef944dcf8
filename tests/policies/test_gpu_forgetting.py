"""A runtime whose pods no longer have a GPU forgets it; one whose GPU reading is late or failing never does.

The exporters' texts are read as the scrape source reads them (`read_exporter_text`) and decided refresh after
refresh, as the adapter does; what is checked is what the HPA and /debug see: the served
`modelmesh_desired_replicas`, each pod's GPU state, the reason, and the log line. The by-hand runtime: four
pods at GPU busy 0.9 ask for 4 x 0.9 / 0.8 = 4.5 pods, 5; at 10 req/s each and `target_rps_per_pod` 20, the
request term asks for 4 x 10 / 20 = 2.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.sources.exposition import read_exporter_text
from exporter import names
from tests.policies.builders import PROPERTIES
from tests.support.exporter_texts import load_lines

KEY = RuntimeKey("ns", "modelmesh-serving-x")
START = 2_000_000_000.0
WINDOW = 30.0
DESIRED = ServedMetric.DESIRED_REPLICAS

GPU_OK = "ok"
GPU_BEFORE_FIRST_PASS = "before its first pass"  # success 0, no timestamp, no series yet
GPU_FAILING = "failing"  # success 0, the GPUs that still answer published, the last good time kept
GPU_FAILING_NO_SERIES = "failing, no GPU answers"
NO_GPU = "--no-gpu"  # no collector="gpu" series at all
GPU_STATES = (GPU_OK, GPU_BEFORE_FIRST_PASS, GPU_FAILING, GPU_FAILING_NO_SERIES, NO_GPU)


def exporter_text(gpu: str, busy: float, now: float, rps: float = 10.0) -> str:
    """One exporter's `/metrics`, the series the adapter reads, as the exporter writes them at `now`."""
    lines = load_lines(now, rps)
    if gpu in (GPU_OK, GPU_FAILING):
        lines.append(f'{names.GPU_BUSY_RATIO}{{gpu="0",uuid="GPU-0"}} {busy!r}')
    if gpu != NO_GPU:
        lines.append(f'{names.COLLECTOR_SUCCESS}{{collector="gpu"}} {1.0 if gpu == GPU_OK else 0.0}')
    if gpu == GPU_OK:
        lines.append(f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="gpu"}} {now!r}')
    elif gpu in (GPU_FAILING, GPU_FAILING_NO_SERIES):
        lines.append(f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="gpu"}} {START!r}')
    return "\n".join(lines) + "\n"


def refresh(states: list[str], now: float, memory: RuntimeMemory | None, policy: RuntimePolicy,
            busy: float = 0.9) -> tuple[RuntimeView, RuntimeMemory]:
    pods = tuple(read_exporter_text(exporter_text(state, busy, now), f"pod-{i}", True, now).sample
                 for i, state in enumerate(states))
    return decide(RuntimeSnapshot(KEY, pods, now), policy, memory, now, WINDOW)


def served(view: RuntimeView) -> float | None:
    return view.values[DESIRED].value


def gpu_states(view: RuntimeView) -> list[str]:
    return [dict(pod.signals)["gpu"] for pod in view.pods]


POLICY = RuntimePolicy(scale_down_tau_s=0.0, target_rps_per_pod=20.0)


def test_pods_replaced_one_by_one_by_cpu_only_ones_hold_then_forget_the_gpu(
        caplog: pytest.LogCaptureFixture) -> None:
    view, memory = refresh([GPU_OK] * 4, START, None, POLICY)
    assert served(view) == 5.0
    caplog.set_level(logging.INFO)
    for moved in range(1, 4):  # while some pods still have a GPU, theirs is not the runtime's whole load
        now = START + 15.0 * moved
        view, memory = refresh([NO_GPU] * moved + [GPU_OK] * (4 - moved), now, memory, POLICY, busy=0.1)
        assert served(view) == 5.0, (moved, view.reason)
        assert gpu_states(view) == ["absent"] * moved + ["fresh"] * (4 - moved)
        assert "gpu absent on" in view.held["gpu proposal"]
    assert "forgets its GPU" not in caplog.text

    now = START + 60.0
    view, memory = refresh([NO_GPU] * 4, now, memory, POLICY)
    assert served(view) == 2.0, view.reason  # the request term's
    assert gpu_states(view) == ["absent"] * 4
    assert "no ready pod has a GPU collector" in view.reason and "gpu" not in view.signal_coverage
    assert view.values[ServedMetric.GPU_BUSY].value is None
    forgot = [r for r in caplog.records if "forgets its GPU" in r.getMessage()]
    assert [r.levelno for r in forgot] == [logging.INFO]
    assert str(KEY) in forgot[0].getMessage() and "5 pods" in forgot[0].getMessage()

    view, memory = refresh([NO_GPU] * 4, now + 15.0, memory, POLICY)
    assert served(view) == 2.0
    assert len([r for r in caplog.records if "forgets its GPU" in r.getMessage()]) == 1  # said once

    # A pod with a GPU collector again brings the GPU back: its term proposes as ever.
    view, memory = refresh([GPU_OK] * 4, now + 30.0, memory, POLICY)
    assert served(view) == 5.0


def test_a_runtime_left_without_a_capacity_signal_is_warned_about() -> None:
    policy = RuntimePolicy(scale_down_tau_s=0.0)
    view, memory = refresh([GPU_OK] * 4, START, None, policy)
    assert served(view) == 5.0 and not view.warnings
    view, memory = refresh([NO_GPU] * 4, START + 15.0, memory, policy)
    assert served(view) == 4.0  # the Ready pods: no capacity term can propose
    assert len(view.warnings) == 1 and "target_rps_per_pod" in view.warnings[0]


@pytest.mark.parametrize("late", [GPU_BEFORE_FIRST_PASS, GPU_FAILING, GPU_FAILING_NO_SERIES])
def test_a_gpu_late_or_failing_on_every_pod_is_missing_and_holds(late: str) -> None:
    view, memory = refresh([GPU_OK] * 4, START, None, POLICY)
    for step in range(1, 5):
        view, memory = refresh([late] * 4, START + 15.0 * step, memory, POLICY, busy=0.1)
        assert served(view) == 5.0, view.reason
        assert set(gpu_states(view)) <= {"missing", "stale"}, gpu_states(view)
    assert not view.warnings


@PROPERTIES
@given(steps=st.lists(st.tuples(st.lists(st.sampled_from(GPU_STATES), min_size=4, max_size=4),
                                st.floats(min_value=0.0, max_value=1.0)), min_size=1, max_size=12),
       target_rps=st.sampled_from([None, 20.0]))
@example(steps=[([NO_GPU] * 3 + [GPU_FAILING], 0.0)] * 3, target_rps=20.0)
@example(steps=[([NO_GPU] * 3 + [GPU_BEFORE_FIRST_PASS], 0.0), ([NO_GPU] * 4, 0.0)], target_rps=None)
def test_a_failing_gpu_collector_never_lowers_the_served_replicas(
        steps: list[tuple[list[str], float]], target_rps: float | None) -> None:
    """From four pods at GPU busy 0.9 (5 pods served), each refresh every pod's GPU is fine, late, failing or
    off (`--no-gpu`), at some busy: while any pod's exporter says its GPU collector fails (or has not passed yet),
    the served replicas never fall. Only a refresh where every pod is off may let them fall."""
    policy = RuntimePolicy(scale_down_tau_s=0.0, target_rps_per_pod=target_rps)
    view, memory = refresh([GPU_OK] * 4, START, None, policy)
    before = served(view)
    assert before == 5.0
    for i, (states, busy) in enumerate(steps, start=1):
        view, memory = refresh(states, START + 15.0 * i, memory, policy, busy=busy)
        now = served(view)
        assert now is not None
        if set(states) & {GPU_BEFORE_FIRST_PASS, GPU_FAILING, GPU_FAILING_NO_SERIES}:
            assert now >= before, (i, states, now, before, view.reason)
        before = now
