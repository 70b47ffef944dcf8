"""What to change where skew-aware missed a part of the goal: the settings that move that part, in the report.

"missed: pod-hours, avoidable cold loads" named the goal but not what to change: a reviewer found only by hand
that `target_lru_age_s: 3600` took skew-aware's cold loads to 0.02x mean-hpa's (at 1.84x its pod-hours). For each
part skew-aware missed, the report now names the settings that move it, which way, what that costs, each with
the command that runs the trace again with it changed (`rerun`). Only settings that a test of `simulate` shows
moving that part that way on a small trace are named (tests/simulation/test_advice.py); `target_queue_delay_s`
and the deletion costs' need weights moved nothing on those traces, so they are not. Where the report knows a
part is out of reach of any replica policy (the bound, `goal_ceiling`), it says that instead.

The values tried are the setting in effect times a factor (read from the run's policy, never a default
written here), so that each suggestion is a step from where the user is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from autoscaler.simulation.figures import ratio_text
from autoscaler.simulation.goal import DELAYED, LABELS, POD_HOURS
from autoscaler.simulation.goal_ceiling import FIELD
from autoscaler.simulation.hpa import DOWNSCALE_STABILIZATION_S
from autoscaler.simulation.rerun import Rerun
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR

POLICY: Final = "skew-aware"
"""The policy advised: the one whose settings `--config` and `--hpa-behavior` shape."""

MIN_REPLICAS: Final = "--min-replicas"
HPA_WINDOW: Final = "behavior.scaleDown.stabilizationWindowSeconds"
RAISE, LOWER = "raise", "lower"


@dataclass(frozen=True, slots=True)
class Lever:
    """A setting that moves one part of the goal, which way, and the part it costs."""

    part: str
    """The part it moves (a key of goal.LABELS), the way that meets it."""
    setting: str
    """A policy key of `--config`'s `defaults:`, `--min-replicas`, or the HPA's scale-down window."""
    direction: str
    step: Callable[[float], float]
    """The value to try, from the value in effect."""
    costs: str
    """The part that moves the other way (a key of goal.LABELS)."""
    why: str
    """What the setting does, in a few words, for report.json."""


def _times(factor: float) -> Callable[[float], float]:
    return lambda now: round(now * factor, 3)


def _by(delta: float, low: float, high: float) -> Callable[[float], float]:
    return lambda now: round(min(high, max(low, now + delta)), 3)


LEVERS: Final = (
    Lever("avoidable_cold_loads", "target_lru_age_s", RAISE, _times(6), "pod_hours",
          "the models used within it are held: the cache term asks for the pods that hold them"),
    Lever("avoidable_cold_loads", "cache_full_ratio", LOWER, _times(0.5), "pod_hours",
          "the cache term asks for pods while the caches are this full, before they evict"),
    Lever("pod_hours", "scale_down_tau_s", LOWER, _times(0.25), "delayed",
          "the served replicas fall faster after a peak"),
    Lever("pod_hours", "target_gpu_busy", RAISE, _by(0.1, 0.05, 0.95), "delayed",
          "each pod runs busier, so fewer pods carry the load"),
    Lever("pod_hours", HPA_WINDOW, LOWER, lambda now: float(SHIPPED_BEHAVIOR.scale_down.stabilization_window_s),
          "delayed", "the HPA scales down without waiting out the window (the shipped behavior's)"),
    Lever("delayed", "scale_down_tau_s", RAISE, _times(2), "pod_hours",
          "the served replicas fall slower, so pods are there when the load comes back"),
    Lever("delayed", "target_gpu_busy", LOWER, _by(-0.1, 0.05, 0.95), "pod_hours",
          "each pod keeps more headroom for bursts"),
    Lever("delayed", "queue_drain_s", LOWER, _times(0.25), "pod_hours",
          "queued work asks for more pods, to drain sooner"),
    Lever("delayed", MIN_REPLICAS, RAISE, _times(2), "pod_hours",
          "more pods in the quiet hours, ready for the first burst"),
)
"""Each backed by a test of `simulate` that moves its part (and its cost) the way named."""


def _now(lever: Lever, rerun: Rerun, report: Mapping[str, Any]) -> float | None:
    """The setting's value in this run; None where the lever does not apply to it."""
    cluster = report["cluster"]
    if lever.setting == MIN_REPLICAS:  # the policy file's min_replicas, where higher, is the floor skew-aware ran
        floor = max(rerun.min_replicas, rerun.policy.min_replicas or 0)
        # a floor skew-aware never came down to holds no pod: raising it changes nothing (a busy 6 h at 4 pods)
        return float(floor) if report["policies"][POLICY].get("least_replicas", floor) <= floor else None
    if lever.setting == HPA_WINDOW:
        if rerun.hpa_behavior is None:  # the shipped behavior already
            return None
        behavior = rerun.behavior  # None: an HPA without behavior, the controller's own window
        return float(DOWNSCALE_STABILIZATION_S if behavior is None else behavior.scale_down.stabilization_window_s)
    if lever.setting == "queue_drain_s" and not cluster.get("queue_timed", True):
        return None  # an untimed queue reports no delay: the queue term never proposes
    value = getattr(rerun.policy, lever.setting)
    return None if value is None else float(value)


def _setting(lever: Lever, rerun: Rerun, report: Mapping[str, Any]) -> dict[str, Any] | None:
    now = _now(lever, rerun, report)
    if now is None:
        return None
    tried = lever.step(now)
    if tried == now:
        return None
    if lever.setting == MIN_REPLICAS:
        tried = float(min(int(tried), rerun.max_replicas))
        if tried <= now:
            return None
    where = ("--hpa-behavior" if lever.setting == HPA_WINDOW else "flag" if lever.setting == MIN_REPLICAS
             else "--config defaults:")
    key = "hpa_behavior" if lever.setting == HPA_WINDOW else lever.setting
    return {"setting": lever.setting, "in": where, "direction": lever.direction, "now": _number(now),
            "try": _number(tried), "costs": lever.costs, "why": lever.why, "command": rerun.command(key, tried)}


def _number(value: float) -> float | int:
    return int(value) if value == int(value) else value


def advice(report: Mapping[str, Any], rerun: Rerun | None) -> list[dict[str, Any]]:
    """report.json's `advice`: for each part of the goal skew-aware missed, the settings that move it
    (`settings`), or why none does (`instead`); empty where it met the goal, or was not judged."""
    goal = report["policies"].get(POLICY, {}).get("goal")
    if goal is None or rerun is None:
        return []
    entries = []
    for part, verdict in goal["parts"].items():
        if verdict["met"]:
            continue
        instead = _out_of_reach(report, part)
        settings = [] if instead else [s for lever in LEVERS if lever.part == part
                                       if (s := _setting(lever, rerun, report)) is not None]
        entries.append({"part": part, "settings": settings, "instead": instead})
    return entries


def _out_of_reach(report: Mapping[str, Any], part: str) -> str | None:
    """Why no setting moves `part` to the goal, where the report knows it: the bound's delays above the goal, or
    the goal's pod-hours below what the models in use (or the requests) need."""
    bound = report.get("bound")
    if part == "delayed" and bound is not None and bound.get("delay_goal_reachable") is False:
        return (f"out of reach of any replica policy: fixed-max, every pod maxReplicas allows all day, delays "
                f"{ratio_text(bound['delayed_vs_mean-hpa'])} mean-hpa's, above the goal's {DELAYED:g}x "
                f"(the Bound line says what is left)")
    note = report.get(FIELD)
    if part == "pod_hours" and note is not None:
        means = "cold loads on models in use" if note["short_of"] == "models_in_use" else "delayed requests"
        return (f"the goal's {POD_HOURS:g}x mean-hpa's pod-hours is {ratio_text(note['goal_vs_cache_oracle'])} the "
                f"cache oracle: fewer pod-hours means {means}")
    return None


def advice_text(report: Mapping[str, Any]) -> str | None:
    """The advice in words, printed under the goal's verdict and in report.md: a line per part missed, naming
    each setting with its value now and the value to try, and the command that compares the first."""
    entries = report.get("advice")
    if not entries:
        return None
    lines = [f"What to change ({POLICY}; keys go under `defaults:` in the --config file. Each moved its part the way "
             f"named, at the cost named, in the simulator's tests: compare to see what it does on this trace):"]
    for entry in entries:
        label = LABELS[entry["part"]]
        if entry["instead"]:
            lines.append(f"- {label}: {entry['instead']}")
            continue
        if not entry["settings"]:
            lines.append(f"- {label}: no setting of {POLICY} moves it here")
            continue
        named = "; ".join(f"{s['direction']} {_named(s)} {s['now']:g} -> {s['try']:g} (costs {LABELS[s['costs']]})"
                          for s in entry["settings"])
        lines += [f"- {label}: {named}", f"  compare: {entry['settings'][0]['command']}"]
    return "\n".join(lines)


def _named(setting: Mapping[str, Any]) -> str:
    return f"{setting['setting']} (--hpa-behavior)" if setting["in"] == "--hpa-behavior" else setting["setting"]
