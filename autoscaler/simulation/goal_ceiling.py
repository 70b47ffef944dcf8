"""The goal's pod-hours part below the cache oracle: found in a report, and said.

The goal allows a policy at most 1.15x mean-hpa's pod-hours. On a trace of many quiet models (Azure Functions'
shape) mean-hpa sits at minReplicas, below the pods that hold the models used within `target_lru_age_s` (the
cache oracle), so 1.15x of it asks for fewer pods than the models in use need: a policy meets it only by
evicting models still in use and loading them again, and "skew-aware: missed: pod-hours 1.358x" read as waste.
The report says so, with the numbers, as its "Bound:" sentence says when the delay part is out of reach of any
replica policy. Where the requests' oracle alone is above it (mean-hpa held below the requests' need, by
maxReplicas), what it asks for is fewer pods than the requests need, and that is said instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from autoscaler.simulation.figures import figure, hours_text, ratio_figure, ratio_text
from autoscaler.simulation.goal import POD_HOURS

FIELD: Final = "pod_hours_goal_below_cache_oracle"
"""report.json's field, present only where the goal's pod-hours is below the cache oracle."""

MEANS: Final = {
    "models_in_use": "This part of the goal asks a policy to hold fewer pods than the models in use need: meeting "
                     "it means cold loads on models used within target_lru_age_s, and a policy that holds them "
                     "misses it.",
    "requests": "This part of the goal asks a policy for fewer pods than serving the requests takes with every "
                "pod at full capacity (the requests' oracle, {oracle} pod-hours): meeting it means delayed "
                "requests.",
}
"""What a policy within the goal's pod-hours gives up, by what the goal's pod-hours is short of."""


def goal_ceiling_note(report: Mapping[str, Any], baseline: str) -> dict[str, Any] | None:
    """report.json's note on the goal's pod-hours (at most POD_HOURS x `baseline`'s) where it is below the cache
    oracle, from the report's own figures (None where `baseline` did not run or the cache oracle is within it)."""
    base = report["policies"].get(baseline)
    cache, oracle = report["cache_oracle_pod_hours"], report["oracle_pod_hours"]
    if base is None or not cache:
        return None
    goal = POD_HOURS * base["pod_hours"]
    ratio = ratio_figure(goal / cache)
    if ratio >= 1:  # within what three decimals show: "1x the cache oracle" is no shortfall to a reader
        return None
    short_of = "requests" if goal < oracle else "models_in_use"
    return {"goal_pod_hours": figure(goal), "cache_oracle_pod_hours": cache,
            "goal_vs_cache_oracle": ratio, "short_of": short_of,
            "means": MEANS[short_of].format(oracle=hours_text(oracle))}


def goal_ceiling_text(report: Mapping[str, Any], baseline: str) -> str | None:
    """The note in words, for the printed notes and report.md (None where the report has none)."""
    note = report.get(FIELD)
    if note is None:
        return None
    return (f"Pod-hours goal below the cache oracle: at most {POD_HOURS:g}x {baseline}'s pod-hours is "
            f"{hours_text(note['goal_pod_hours'])} pod-hours, {ratio_text(note['goal_vs_cache_oracle'])} the "
            f"{hours_text(note['cache_oracle_pod_hours'])} pod-hours of the cache oracle (enough pods each interval "
            f"to serve its requests at full capacity and hold the models used within target_lru_age_s). "
            f"{note['means']}")
