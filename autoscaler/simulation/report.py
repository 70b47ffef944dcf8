"""What a simulation run leaves behind, as report.json holds it: each policy's counts, its ratios against mean-hpa
and its verdict on the goal, the bound, the oracle and the advice.

In words (the table, report.md): report_text.py; timeline.png: timeline_plot.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from autoscaler.simulation.advice import advice
from autoscaler.simulation.engine import Oracle, PolicyResult
from autoscaler.simulation.figures import figure, ratio_figure
from autoscaler.simulation.goal import QUIET_RATIO, judge
from autoscaler.simulation.goal_ceiling import FIELD, goal_ceiling_note
from autoscaler.simulation.policies import MEAN_TARGET_PERCENT
from autoscaler.simulation.rerun import Rerun
from autoscaler.simulation.stuck_baseline import stuck_note

BASELINE = "mean-hpa"
MOVED_WORDS: Final = "moved by scale-down"
"""What the table, report.md, the README and the bench tables call the loads a scale-down caused (report.json's
`migrated_loads`, a key kept for the scripts that read it): one name, so that a user can match them."""
BOUND = "fixed-max"


def _ratio(value: float, base: float) -> float | None:
    return ratio_figure(value / base) if base else None


@dataclass(frozen=True, slots=True)
class Counted:
    """A replay's figures as the report shows them (a goal.Outcome): delayed requests in whole requests, and
    the delayed ratio and every comparison worked out from that count.

    The replay is fluid: a request spread over its interval is delayed in part (a tenth of a minute's one
    request waiting for a 10 s load). Written as a whole count beside a ratio of the fraction, a report read
    "0 delayed" with ratio 2.8e-05, and "1x" mean-hpa's delays where 0 against 0 reads "n/a" elsewhere. A
    user counts requests, so the count is whole, and what is said of it agrees with it."""

    pod_hours: float
    delayed_requests: int
    requests: int
    cold_loads: int

    @property
    def delayed_ratio(self) -> float:
        return self.delayed_requests / self.requests if self.requests else 0.0


def counted(result: PolicyResult) -> Counted:
    return Counted(result.pod_hours, round(result.delayed_requests), round(result.requests), result.cold_loads)


def policy_entry(result: PolicyResult, baseline: PolicyResult | None, unavoidable: int = 0) -> dict[str, Any]:
    shown = counted(result)
    entry: dict[str, Any] = {
        "description": result.description,
        "pod_hours": figure(result.pod_hours),
        "overloaded_seconds": round(result.overloaded_seconds, 1),
        "delayed_requests": shown.delayed_requests,
        "delayed_ratio": round(shown.delayed_ratio, 6),
        "delayed_waiting_for_loads": round(result.delayed_loading),
        "refused_requests": round(result.refused_requests),
        "cold_loads": result.cold_loads,
        "avoidable_cold_loads": max(0, result.cold_loads - unavoidable),
        "copy_loads": result.copy_loads,
        "cold_loads_after_removal": result.cold_loads_after_removal,
        "migrated_loads": result.migrated_loads,
        "janitor_removals": result.janitor_removals,
        "scale_events": result.scale_events,
        "peak_replicas": result.peak_replicas,
        "least_replicas": min(result.timeline.replicas, default=result.peak_replicas),
        "requests": shown.requests,
        "terms": dict(sorted(result.terms.items())),
        "load_waits_s": {"cold_loads": wait_summary(result.load_waits.cold),
                         "copies": wait_summary(result.load_waits.copies)},
        "cold_loads_never_ran": never_ran(result),
        "wall_seconds": round(result.wall_s, 2),
    }
    if stuck := round(sum(requests for requests, _ in result.stuck_copies.values())):  # untimed only
        entry["untimed_stuck_requests"] = stuck
    if crowded := round(sum(requests for requests, _, _ in result.crowded_pods.values())):  # untimed only
        entry["untimed_crowded_requests"] = crowded
    if baseline is not None and baseline is not result:
        base = counted(baseline)
        entry[f"vs_{BASELINE}"] = {
            "pod_hours": _ratio(result.pod_hours, baseline.pod_hours),
            "delayed_requests": _ratio(shown.delayed_requests, base.delayed_requests),
            "cold_loads": _ratio(result.cold_loads, baseline.cold_loads),
        }
        verdict = judge(shown, base, unavoidable)
        delayed = None if verdict.delayed is None else ratio_figure(verdict.delayed)  # None: mean-hpa delayed none
        entry["goal"] = {"pod_hours": round(verdict.pod_hours, 3), "delayed": delayed,
                         "avoidable_cold_loads": None if verdict.cold is None else round(verdict.cold, 3),
                         "met": verdict.met,
                         "parts": {part.key: {"limit": part.limit, "met": part.met} for part in verdict.parts()}}
    return entry


def never_ran(result: PolicyResult) -> dict[str, int]:
    """Of `cold_loads`, those no loading thread took, by why: their copy evicted from a full cache first (the
    model's next request loads it again, another cold load), their pod removed first (its pre-shutdown copies the
    model elsewhere, a move, not another cold load), or still queued when the trace ended. With `load_waits_s`'s
    cold loads, every cold load once."""
    waits = result.load_waits
    return {"evicted": waits.cold_evicted, "pod_removed": waits.cold_pod_removed, "queued_at_end": waits.cold_queued}


def wait_summary(waits: Sequence[float]) -> dict[str, Any]:
    """How many loads, and their waits for a loading thread: mean, 95th percentile (nearest rank) and longest,
    in seconds (None without a load)."""
    if not waits:
        return {"loads": 0, "mean": None, "p95": None, "max": None}
    ordered = sorted(waits)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"loads": len(ordered), "mean": round(sum(ordered) / len(ordered), 1), "p95": round(p95, 1),
            "max": round(ordered[-1], 1)}


def bound_entry(bound: PolicyResult, baseline: PolicyResult | None, replicas: int) -> dict[str, Any]:
    """The fewest delays any replica policy within the bounds gets (fixed-max), and whether that reaches the
    goal's 0.1x mean-hpa: if not, no setting of ours does, and what is left is ModelMesh's copy timing."""
    shown = counted(bound)
    entry: dict[str, Any] = {
        "policy": BOUND, "replicas": replicas, "delayed_requests": shown.delayed_requests,
        "delayed_ratio": round(shown.delayed_ratio, 6),
        "delayed_waiting_for_loads": round(bound.delayed_loading),
    }
    if stuck := round(sum(requests for requests, _ in bound.stuck_copies.values())):  # untimed only
        entry["untimed_stuck_requests"] = stuck
    if crowded := round(sum(requests for requests, _, _ in bound.crowded_pods.values())):  # untimed only
        entry["untimed_crowded_requests"] = crowded
    if baseline is not None:
        base = counted(baseline)
        verdict = judge(shown, base, 0)
        entry[f"delayed_vs_{BASELINE}"] = _ratio(shown.delayed_requests, base.delayed_requests)
        entry["delay_goal_reachable"] = verdict.delays_met
        entry["quiet_baseline"] = base.delayed_ratio < QUIET_RATIO  # too few delays for a ratio to mean much
    return entry


@dataclass(frozen=True, slots=True)
class RunInfo:
    trace: Mapping[str, Any]
    cluster: Mapping[str, Any]
    oracle: Oracle
    warnings: Sequence[str] = ()
    """What the run did not take as given (hours without a row replayed as no traffic, columns left out, an
    HPA's bounds not simulated): said on stderr and kept with the report, which outlives the terminal."""
    trace_start_s: float = 0.0
    """The trace's first timestamp: notes name moments of the replay in the trace's own times."""
    rerun: Rerun | None = None
    """This run's command and policy, which the advice's commands change one setting of (None: no advice)."""


def build_report(info: RunInfo, results: Sequence[PolicyResult],
                 replay: Callable[[Mapping[str, Any], str], PolicyResult] | None = None) -> dict[str, Any]:
    """The report of `results`; `replay` (skew-aware replayed with one setting changed, under a progress bar's
    label) measures the advice on the trace (None: listed unmeasured)."""
    baseline = next((r for r in results if r.name == BASELINE), None)
    bound = next((r for r in results if r.name == BOUND), None)
    report: dict[str, Any] = {
        "trace": dict(info.trace),
        "cluster": dict(info.cluster),
        "oracle_pod_hours": figure(info.oracle.pod_hours),
        "cache_oracle_pod_hours": figure(info.oracle.cache_pod_hours),
        "unavoidable_cold_loads": info.oracle.first_loads,
        "policies": {r.name: policy_entry(r, baseline, info.oracle.first_loads) for r in results},
    }
    if baseline is not None:  # only where it happened: a run whose mean-hpa scaled to the load reads as before
        duration_s = float(info.trace["hours"]) * 3600.0
        note = stuck_note(baseline.timeline, int(info.cluster["max_replicas"]), MEAN_TARGET_PERCENT / 100.0,
                          duration_s, info.trace_start_s)
        if note is not None:
            report["policies"][BASELINE]["stuck_below_target"] = note
    if bound is not None:
        report["bound"] = bound_entry(bound, baseline, int(info.cluster["max_replicas"]))
    if (ceiling := goal_ceiling_note(report, BASELINE)) is not None:  # only where it is so, as stuck_below_target
        report[FIELD] = ceiling
    def measure(settings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        assert replay is not None and baseline is not None
        return [policy_entry(replay(setting, f"advice {i}/{len(settings)}"), baseline, info.oracle.first_loads)
                for i, setting in enumerate(settings, 1)]

    measured = replay is not None and baseline is not None
    # always, as `warnings`: [] where skew-aware met the goal
    report["advice"] = advice(report, info.rerun, measure if measured else None)
    report["warnings"] = list(info.warnings)  # always: `jq .warnings` on a run without any read null
    return report
