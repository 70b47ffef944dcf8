"""What the demo says at its end of the story it did not get to show: a run too short for it said nothing.

`demo --pods 1 --duration 15` showed the scale-up and tables of the traffic drop, then "demo finished", with no
scale-down and no word why: the adapter's served value falls slowly on purpose (its scale-down time constant, the
one slow-down rail), and the run ended while it fell. How long that takes depends on the machine (how soon the pods
a scale-up started are Ready and ranked, `scenario.Phase.waits_for_starting_pods`), so no `--duration` is refused for
it: the end of the run says what it did not show, and why, and what `--duration` would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHOWS_IT_S = 40.0
"""A `--duration` that shows the whole story on a slow machine (the end-to-end test's run, with its adapter held
stopped for 20 s as it starts and each new exporter for 20 s)."""


@dataclass
class StoryProgress:
    """What of the story the run has shown so far (`run.Demo` notes it as it goes)."""

    scaled_up: bool = False
    dropped_at: float | None = None
    """Seconds into the run when the traffic drop began; None before it."""
    scaled_down_after_drop: bool = False


def longer(duration: float) -> str:
    """The `--duration` to suggest: twice this one, and at least `SHOWS_IT_S`."""
    return f"--duration {max(SHOWS_IT_S, math.ceil(2 * duration)):g}"


def not_shown(progress: StoryProgress, *, elapsed: float, duration: float, replicas: int, min_replicas: int,
              max_replicas: int, initial: int, desired: str, tau_s: float) -> list[str]:
    """One line for each part of the story the run ended without: the hot model's scale-up, the drop's scale-down
    (only where there were pods above minReplicas to bring down). None where it showed all."""
    said = []
    if not progress.scaled_up:
        if max_replicas <= initial:
            said.append(f"the HPA added no pod for the hot model: its maxReplicas (--max-pods {max_replicas}) is the "
                        f"{initial} the demo starts with")
        else:
            said.append(f"the run ended before the HPA added a pod for the hot model: a longer --duration (e.g. "
                        f"{longer(duration)}) shows it")
    if progress.dropped_at is not None and not progress.scaled_down_after_drop and replicas > min_replicas:
        said.append(f"the run ended {elapsed - progress.dropped_at:.0f} s after the traffic dropped, before the HPA "
                    f"brought pods down: the adapter serves desired_replicas={desired} at {replicas} replicas, and "
                    f"falls slowly on purpose (scale_down_tau_s {tau_s:g} s); a longer --duration (e.g. "
                    f"{longer(duration)}) shows it")
    return said
