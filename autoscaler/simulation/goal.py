"""The goal the shipped defaults are tuned for, judged against mean-hpa on one trace (docs/design.md, Simulator).

At most 0.1x mean-hpa's delayed requests and 0.25x its avoidable cold loads (beyond the first load of models
that appear after the start: no policy avoids those) for at most 1.15x its pod-hours. Where mean-hpa itself
delays under 0.1% of requests a ratio means little, so the delay part counts as met when the policy delays
at most 5% more. The same judgement tells whether the delay part is *reachable* at all: `fixed-max`, every pod
maxReplicas allows throughout the trace, delays the least of any replica policy; if even it misses 0.1x, what is left
waits for ModelMesh's copies and loads, not for pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

POD_HOURS: Final = 1.15
DELAYED: Final = 0.1
COLD: Final = 0.25
QUIET_RATIO: Final = 0.001
"""Below this delayed ratio mean-hpa delays too little for a ratio to mean much."""
QUIET_SLACK: Final = 1.05


class Outcome(Protocol):
    """What the goal reads of a replay (engine.PolicyResult)."""

    @property
    def pod_hours(self) -> float: ...
    @property
    def delayed_requests(self) -> float: ...
    @property
    def delayed_ratio(self) -> float: ...
    @property
    def cold_loads(self) -> int: ...


LABELS: Final = {"pod_hours": "pod-hours", "delayed": "delayed requests",
                 "avoidable_cold_loads": "avoidable cold loads"}
"""The parts by their field in report.json's `goal`, as the report names them."""


@dataclass(frozen=True, slots=True)
class Part:
    """One of the goal's three parts: the report prints each, so that a missed goal says which part missed."""

    key: str
    """The field of report.json's `goal` that holds `ratio` (LABELS names it)."""
    ratio: float | None
    limit: float
    """The most `ratio` may be: the delay part's is QUIET_SLACK where mean-hpa barely delays."""
    met: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    pod_hours: float  # x mean-hpa's
    delayed: float | None  # x mean-hpa's; None when mean-hpa delayed none (then met only by delaying none)
    cold: float | None  # avoidable cold loads, x mean-hpa's; None when mean-hpa had none (then met only by none)
    delays_met: bool
    met: bool
    quiet_baseline: bool = False
    cold_met: bool = True
    """mean-hpa delayed under QUIET_RATIO of requests: the delay part asks only not to delay QUIET_SLACK more."""

    def parts(self) -> tuple[Part, Part, Part]:
        """The three parts in the order the goal names them; `met` is all three."""
        return (Part("pod_hours", self.pod_hours, POD_HOURS, self.pod_hours <= POD_HOURS),
                Part("delayed", self.delayed, delay_limit(self.quiet_baseline), self.delays_met),
                Part("avoidable_cold_loads", self.cold, COLD, self.cold_met))

    def word(self) -> str:
        """"met", or the parts missed, as the report's goal column says them (`goal_word`)."""
        return goal_word(part.key for part in self.parts() if not part.met)


def delay_limit(quiet_baseline: bool) -> float:
    """The most a policy's delays may be, x mean-hpa's: QUIET_SLACK where mean-hpa barely delays (`quiet_baseline`),
    else DELAYED. The Bound line names it (it said "the goal's 0.1x is within reach" of 1x a quiet mean-hpa's)."""
    return max(DELAYED, QUIET_SLACK) if quiet_baseline else DELAYED


def goal_word(missed: Iterable[str]) -> str:
    """A goal column's word: "met", or the parts `missed` (keys of LABELS) named."""
    named = [LABELS[key] for key in missed]
    return "met" if not named else "missed: " + ", ".join(named)


def judge(result: Outcome, base: Outcome, unavoidable_cold: int) -> Verdict:
    """`result` against mean-hpa's `base` on the same trace; `unavoidable_cold`: first loads after the start."""
    pod_hours = result.pod_hours / base.pod_hours if base.pod_hours else 0.0
    # Over a mean-hpa that delayed none there is no ratio: it read 0.0x, and met, for a policy that delayed some
    delayed = result.delayed_requests / base.delayed_requests if base.delayed_requests else None
    avoidable = base.cold_loads - unavoidable_cold
    # Over a mean-hpa with no avoidable cold load there is no ratio either: it read 0.0x, and met, for a policy
    # that had some
    ours = max(0, result.cold_loads - unavoidable_cold)
    cold = ours / avoidable if avoidable > 0 else None
    cold_met = cold <= COLD if cold is not None else ours == 0
    quiet_baseline = base.delayed_ratio < QUIET_RATIO
    quiet = quiet_baseline and result.delayed_requests <= base.delayed_requests * QUIET_SLACK
    delays_met = (delayed is not None and delayed <= DELAYED) or quiet
    return Verdict(pod_hours, delayed, cold, delays_met, pod_hours <= POD_HOURS and delays_met and cold_met,
                   quiet_baseline, cold_met)
