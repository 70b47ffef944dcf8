"""What the end of a demo run says it did not show, one row per named case: `demo --pods 1 --duration 15` ended
after the drop with no scale-down and no word why (the whole run is `test_demo.py`'s
`test_a_run_too_short_to_bring_pods_down_says_why_at_its_end`)."""

from __future__ import annotations

import pytest

from autoscaler.demo.short_run import StoryProgress, not_shown

UP_AND_DOWN = StoryProgress(scaled_up=True, dropped_at=8.0, scaled_down_after_drop=True)
UP_NOT_DOWN = StoryProgress(scaled_up=True, dropped_at=8.0)
NEITHER = StoryProgress(dropped_at=8.0)


@pytest.mark.parametrize(("progress", "replicas", "max_replicas", "duration", "says"), [
    pytest.param(UP_AND_DOWN, 3, 8, 40.0, [], id="the whole story: nothing to say"),
    pytest.param(UP_NOT_DOWN, 2, 2, 15.0,
                 ["the run ended 7 s after the traffic dropped, before the HPA brought pods down: the adapter serves "
                  "desired_replicas=1.6 at 2 replicas, and falls slowly on purpose (scale_down_tau_s 5 s); a longer "
                  "--duration (e.g. --duration 40) shows it"], id="--pods 1 --duration 15"),
    pytest.param(UP_NOT_DOWN, 5, 8, 50.0,
                 ["the run ended 7 s after the traffic dropped, before the HPA brought pods down: the adapter serves "
                  "desired_replicas=1.6 at 5 replicas, and falls slowly on purpose (scale_down_tau_s 5 s); a longer "
                  "--duration (e.g. --duration 100) shows it"], id="a slow machine: twice the duration"),
    pytest.param(NEITHER, 1, 2, 6.0,
                 ["the run ended before the HPA added a pod for the hot model: a longer --duration (e.g. --duration "
                  "40) shows it"], id="too short for the scale-up: no pod above minReplicas to bring down"),
    pytest.param(NEITHER, 1, 1, 30.0,
                 ["the HPA added no pod for the hot model: its maxReplicas (--max-pods 1) is the 1 the demo starts "
                  "with"], id="--max-pods leaves no room"),
])
def test_the_end_of_a_run_names_what_it_did_not_show(progress: StoryProgress, replicas: int, max_replicas: int,
                                                     duration: float, says: list[str]) -> None:
    assert not_shown(progress, elapsed=15.0, duration=duration, replicas=replicas, min_replicas=1,
                     max_replicas=max_replicas, initial=1, desired="1.6", tau_s=5.0) == says
