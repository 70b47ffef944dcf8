"""The demo's phases on a slow machine, as its user reads them: the traffic drop never comes while a pod the
scale-up started is still starting (it came at a fixed time, the ReplicaSet removed the starting pods first,
unranked, and the demo never showed the replicas it went up to), nor while it is Ready but not yet ranked by the
adapter (read as cost 0, it was removed first all the same), for at most `--start-timeout`; and where every pod is
Ready and ranked the phases come at their share of `--duration`, as before."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoPod
from autoscaler.demo.run import Demo
from autoscaler.demo.scenario import PHASES, Phase
from tests.demo.demo_output import unwrap

HOT, DROP = PHASES[1], PHASES[2]

STARTING, UNRANKED, RANKED = "starting", "Ready, not ranked by the adapter yet", "Ready and ranked"

# Each check of the demo's loop: seconds since the one before, and where the scale-up's pod is then.
CHECKS = st.lists(st.tuples(st.floats(0.01, 3.0), st.sampled_from([STARTING, UNRANKED, RANKED])), min_size=1,
                  max_size=120)


def demo_with_a_starting_pod(duration: float, start_timeout: float) -> tuple[Demo, DemoPod]:
    demo = Demo(4, duration, 3.0, Path(tempfile.gettempdir()), start_timeout=start_timeout)
    pod = DemoPod("demo-4", FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6),
                                          model_prefix="demo-0"), 0, 0, created_at=0.0, models="demo-0")
    demo.fleet.pods.append(pod)
    return demo, pod


def play(demo: Demo, pod: DemoPod, checks: list[tuple[float, str]]) -> tuple[list[tuple[float, str, Phase]], str]:
    """Each check's elapsed time, where the pod was, and the phase the demo applied; what it printed."""
    seen, elapsed = [], 0.0
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        for step, state in checks:
            elapsed += step
            pod.ready = state != STARTING
            demo.ranked = frozenset({pod.name} if state == RANKED else ())  # as the adapter's /debug last said
            demo.apply_phase(demo.next_phase(elapsed))
            seen.append((elapsed, state, demo.phase))
    return seen, unwrap(printed.getvalue())


@settings(max_examples=300, deadline=None)
@given(CHECKS, st.floats(10.0, 120.0), st.floats(1.0, 60.0))
def test_the_traffic_drop_waits_for_starting_pods_at_most_the_start_timeout(
        checks: list[tuple[float, str]], duration: float, start_timeout: float) -> None:
    demo, pod = demo_with_a_starting_pod(duration, start_timeout)
    seen, printed = play(demo, pod, checks)
    due = DROP.starts_at * duration
    previous = PHASES[0]
    for elapsed, state, phase in seen:
        if phase is DROP and previous is not DROP:
            # the drop comes with every pod Ready and ranked, or once it has waited its longest
            assert state == RANKED or elapsed - due > start_timeout, (elapsed, due, start_timeout)
        if phase is HOT and elapsed >= due:
            assert state != RANKED, "a drop held with every pod Ready and ranked"
            assert elapsed - due <= start_timeout + 1e-9, "held past --start-timeout"
        assert PHASES.index(phase) >= PHASES.index(previous), "a phase came back"
        previous = phase
    waited = any(phase is HOT and elapsed >= due for elapsed, _, phase in seen)
    assert printed.count("traffic drops once demo-4 has started and the adapter has ranked it") == (
        1 if waited else 0), printed
    # a drop that gave up waiting says so, once, naming what it waited for
    gave_up = [state for i, (elapsed, state, phase) in enumerate(seen)
               if phase is DROP and state != RANKED and elapsed - due > start_timeout and i > 0
               and seen[i - 1][2] is HOT]
    assert printed.count("traffic drops with demo-4 still starting after") == gave_up.count(STARTING), printed
    assert printed.count("traffic drops with demo-4 not ranked by the adapter after") == gave_up.count(UNRANKED), (
        printed)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 3.0), min_size=1, max_size=120), st.floats(10.0, 120.0))
def test_with_every_pod_ready_each_phase_comes_at_its_share_of_the_duration(steps: list[float],
                                                                           duration: float) -> None:
    demo, pod = demo_with_a_starting_pod(duration, 60.0)
    seen, printed = play(demo, pod, [(step, RANKED) for step in steps])
    for elapsed, _, phase in seen:
        assert phase is [p for p in PHASES if elapsed >= p.starts_at * duration][-1]
    assert printed == ""
    assert demo.scenario_time(seen[-1][0]) == seen[-1][0], "the scenario's clock held with every pod ranked"
