"""The demo says when a phase begins, at the moment it begins.

The phase's title was printed only with the periodic table, so a scale-up the new phase caused came first:
"[12s] even load ... desired_replicas=4", "[14s] HPA: ... scale up 4 -> 5", then "[15s] a hot model lands on the
oldest pod": the user read the HPA scaling up before the load that made it.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.run import Demo
from autoscaler.demo.scenario import PHASES
from tests.demo.demo_output import unwrap


def printed_while_stepping(duration: float, steps: list[float]) -> tuple[str, list[tuple[float, int]]]:
    """What a demo without pods prints as its loop steps through `steps` (seconds between checks), and when each
    phase came (elapsed time, index in PHASES)."""
    demo = Demo(4, duration, 3.0, Path(tempfile.gettempdir()))
    came, elapsed = [], 0.0
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        for step in steps:
            elapsed += step
            before = demo.phase
            demo.step(elapsed)
            if demo.phase is not before:
                came.append((elapsed, PHASES.index(demo.phase)))
    return unwrap(printed.getvalue()), came


def test_the_hot_model_is_announced_when_it_lands() -> None:
    """A 60 s demo checked every half second: the hot model lands at 12 s, the drop at 30 s, each said then."""
    printed, came = printed_while_stepping(60.0, [0.5] * 120)
    assert [index for _, index in came] == [1, 2]
    assert f"\n[  12s] phase 2 of 3 begins: {PHASES[1].title}\n" in printed, printed
    assert f"\n[  30s] phase 3 of 3 begins: {PHASES[2].title}\n" in printed, printed


@settings(max_examples=200, deadline=None)
@given(st.floats(10.0, 120.0), st.lists(st.floats(0.01, 3.0), min_size=1, max_size=200))
def test_each_phase_is_said_once_at_the_check_that_applied_it(duration: float, steps: list[float]) -> None:
    printed, came = printed_while_stepping(duration, steps)
    said = [(float(at), int(n)) for at, n in re.findall(r"\[\s*(\d+)s\] phase (\d) of 3 begins", printed)]
    assert said == [(round(at), index + 1) for at, index in came], printed
