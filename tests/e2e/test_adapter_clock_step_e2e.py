"""The adapter's wall clock steps an hour forward (an NTP step, a resumed VM) in the middle of a slow fall,
through the real processes: fake ModelMesh → real exporter → the real adapter under libfaketime, whose wall
clock alone moves (`tests.fakes.node_clock`) → kubectl.

Before, the next refresh took the hour for decay: the served replicas dropped 3 → 1 at once, and the HPA,
with no scale-down window of its own, removed both pods together.

The adapter starts with its wall clock an hour behind, and the step puts it right: an hour forward onto the true
time. libfaketime now and then answers one `time.time()` of a process with the true time, as if there were no
offset; after a step from the true time to an hour ahead, such a reading was a step back of an hour in the middle
of the refreshes the test judges, where after this step it is where the clock is anyway. One before the step is
an hour forward and back again, which the log names as two steps that cancel out: so the test adds the logged
steps up rather than looking for one.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, cast

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.fakes.node_clock import step_clock, steppable_clock_env
from tests.support.processes import poll

pytestmark = pytest.mark.slow

HOUR_BEHIND_S = -3600.0


def test_an_hour_forward_step_of_the_adapters_clock_does_not_end_the_slow_fall(tmp_path: Path) -> None:
    offset = tmp_path / "adapter-clock"
    env = steppable_clock_env(offset)
    step_clock(offset, HOUR_BEHIND_S)
    with data_path_running(tmp_path, pods=1, rps=250, policy={"target_rps_per_pod": 100},
                           adapter_args=["--scale-down-tau", "60", "--workers", "0"], adapter_env=env) as path:
        poll(lambda: path.value("modelmesh_desired_replicas") == 3.0 or None, timeout=30)  # 250 / 100, rounded up
        path.set_load(requests_per_second=50)

        def falling() -> dict[str, Any] | None:  # the target is 1 pod, the served value on its way down
            values = cast(dict[str, Any], debug_runtime(path).get("values", {}))
            desired = values.get("modelmesh_desired_replicas", {})
            return values if desired.get("raw") == 1.0 and desired.get("value") == 3.0 else None

        poll(falling, timeout=20)  # with tau 60 s, 3 stays 3 for 42 s (1 + 2 exp(-t / 60) > 2)
        step_clock(offset, 0.0)  # put right: an hour forward
        stepped = time.time()
        # Refreshes after the step (the adapter's own times): each would have taken the hour for decay.
        poll(lambda: cast(float, debug_runtime(path).get("refreshed_at", 0.0)) > stepped + 2 or None, timeout=15)
        assert path.value("modelmesh_desired_replicas") == 3.0
        assert cast(dict[str, Any], debug_runtime(path)["values"])["modelmesh_desired_replicas"]["raw"] == 1.0
    log = (tmp_path / "adapter.log").read_text()
    steps = [int(size) for size in re.findall(r"the adapter's wall clock stepped ([-+]\d+) s", log)]
    assert steps and abs(sum(steps) - 3600) <= 5, log  # an hour forward, give or take the step tolerance
