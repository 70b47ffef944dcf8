"""What to change where skew-aware missed a part of the goal: the settings that move that part, measured on the trace.

"missed: pod-hours, avoidable cold loads" named the goal but not what to change. A first answer listed, per part
missed, the settings that moved it on the simulator's own small traces: on a user's trace the first of them often
changed nothing or went the wrong way (on a prod-like day of 200 models, `scale_down_tau_s 600` delays 10,240 vs
10,247, `target_gpu_busy 0.7` 11,142, only `--min-replicas 4`, listed last, 1,752). So each candidate (`LEVERS`:
the value tried a step from the run's own, never a default written here) is now replayed on the user's trace,
skew-aware alone with that one setting changed (same cluster, same bounds; mean-hpa's run is the baseline as it
ran), and only those that moved the missed part by `MOVED` or more are advised, the most first, each with what it
did to the other parts (the replay is `cli.run`'s; `--advice off` lists them unmeasured). Where the report knows a
part is out of reach of any replica policy (the bound, `goal_ceiling`), it says that instead; where ModelMesh's
untimed copies held requests on pods that cannot serve them (stuck_copies.py), the delay advice names that fix first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from autoscaler.policies.policy import PROPOSAL_LIMIT
from autoscaler.policies.policy_values import SCALE_DOWN_TAU_RANGE_S, TARGET_LRU_AGE_RANGE_S
from autoscaler.simulation.evidence import MOVED, caveat_text, evidence
from autoscaler.simulation.figures import ratio_text
from autoscaler.simulation.goal import LABELS, POD_HOURS, delay_limit
from autoscaler.simulation.goal_ceiling import FIELD
from autoscaler.simulation.hpa import SYNC_PERIOD_S
from autoscaler.simulation.hpa_windows import DOWN_WINDOW, UP_WINDOW, WINDOWS, window_of
from autoscaler.simulation.rate_check import SCALEUP_RPM_RANGE
from autoscaler.simulation.rerun import Rerun
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR

POLICY: Final = "skew-aware"
"""The policy advised: the one whose settings `--config` and `--hpa-behavior` shape."""

MIN_REPLICAS: Final = "min_replicas"
"""skew-aware's own floor (the policy file's key): raised there, mean-hpa keeps the HPA's minReplicas. Advised as
`--min-replicas`, the compare run raised mean-hpa's floor too and read 0.954x while skew-aware's delays fell 6x."""
RAISE, LOWER = "raise", "lower"

FIELDS: Final = {"pod_hours": "pod_hours", "delayed": "delayed_requests",
                  "avoidable_cold_loads": "avoidable_cold_loads"}
"""Each part of the goal by the field of a policy's entry in report.json that counts it."""

Measure = Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]]
"""Replays skew-aware once per setting (each with `setting` and `try`), and returns each replay's policy entry
as report.json writes it, judged against mean-hpa's run as it ran (`report.policy_entry`)."""


@dataclass(frozen=True, slots=True)
class Lever:
    """A setting that may move one part of the goal, which way, and the part it costs."""

    part: str
    """The part it moves (a key of goal.LABELS), the way that meets it."""
    setting: str
    """A policy key of `--config`'s `defaults:`, or the HPA's scale-down window."""
    direction: str
    step: Callable[[float], float]
    """The value to try, from the value in effect."""
    costs: str
    """The part that moves the other way (a key of goal.LABELS)."""
    why: str
    """What the setting does, in a few words, for report.json."""


def _times(factor: float, low: float = 0.0, high: float = math.inf) -> Callable[[float], float]:
    """`factor` times the value in effect, never under `low`: halving again and again from a follow-up run's
    advice went 75 -> 18.75 -> 4.7 s, under the HPA's 15 s sync; nor over `high`, the most the key takes: doubling
    a day's `scale_down_tau_s`, or six times two days' `target_lru_age_s`, advised a policy file the adapter
    refuses."""
    return lambda now: round(min(high, max(low, now * factor)), 3)


def _by(delta: float, low: float, high: float) -> Callable[[float], float]:
    return lambda now: round(min(high, max(low, now + delta)), 3)


LEVERS: Final = (
    Lever("avoidable_cold_loads", "target_lru_age_s", RAISE, _times(6, high=TARGET_LRU_AGE_RANGE_S[1]), "pod_hours",
          "the models used within it are held: the cache term asks for the pods that hold them"),
    Lever("avoidable_cold_loads", "cache_full_ratio", LOWER, _times(0.5, 0.1), "pod_hours",
          "the cache term asks for pods while the caches are this full, before they evict"),
    Lever("pod_hours", "scale_down_tau_s", LOWER, _times(0.25, SYNC_PERIOD_S), "delayed",
          "the served replicas fall faster after a peak"),
    Lever("pod_hours", "target_gpu_busy", RAISE, _by(0.1, 0.05, 0.95), "delayed",
          "each pod runs busier, so fewer pods carry the load"),
    Lever("pod_hours", DOWN_WINDOW, LOWER, lambda now: float(SHIPPED_BEHAVIOR.scale_down.stabilization_window_s),
          "delayed", "the HPA scales down without waiting out the window (the shipped behavior's; the rest of the "
          "--hpa-behavior file as given)"),
    Lever("delayed", UP_WINDOW, LOWER, lambda now: float(SHIPPED_BEHAVIOR.scale_up.stabilization_window_s),
          "pod_hours", "the HPA scales up without waiting out the window (the shipped behavior's; the rest of the "
          "--hpa-behavior file as given)"),
    Lever("delayed", "scale_down_tau_s", RAISE, _times(2, high=SCALE_DOWN_TAU_RANGE_S[1]), "pod_hours",
          "the served replicas fall slower, so pods are there when the load comes back"),
    Lever("delayed", "target_gpu_busy", LOWER, _by(-0.1, 0.05, 0.95), "pod_hours",
          "each pod keeps more headroom for bursts"),
    Lever("delayed", "queue_drain_s", LOWER, _times(0.25, SYNC_PERIOD_S), "pod_hours",
          "queued work asks for more pods, to drain sooner"),
    Lever("delayed", MIN_REPLICAS, RAISE, _times(2), "pod_hours",
          "more pods in the quiet hours, ready for the first burst"),
)
"""The candidates, each tried on the user's trace before it is advised (`advice`)."""


def _now(lever: Lever, rerun: Rerun, report: Mapping[str, Any]) -> float | None:
    """The setting's value in this run; None where the lever does not apply to it."""
    cluster = report["cluster"]
    if lever.setting == MIN_REPLICAS:  # the policy file's min_replicas, where higher, is the floor skew-aware ran
        floor = max(rerun.min_replicas, rerun.policy.min_replicas or 0)
        # a floor skew-aware never came down to holds no pod: raising it changes nothing (a busy 6 h at 4 pods)
        return float(floor) if report["policies"][POLICY].get("least_replicas", floor) <= floor else None
    if lever.setting in WINDOWS:
        if rerun.hpa_behavior is None:  # the shipped behavior already
            return None
        return float(window_of(rerun.behavior, lever.setting))  # None: an HPA without behavior, the controller's
    if lever.setting == "queue_drain_s" and not cluster.get("queue_timed", True):
        return None  # an untimed queue reports no delay: the queue term never proposes
    value = getattr(rerun.policy, lever.setting)
    return None if value is None else float(value)


def _setting(lever: Lever, rerun: Rerun, report: Mapping[str, Any]) -> dict[str, Any] | None:
    now = _now(lever, rerun, report)
    if now is None:
        return None
    tried = lever.step(now)
    if lever.setting == MIN_REPLICAS:
        tried = float(min(int(tried), _highest_floor(rerun)))
    if tried == now or (lever.direction == RAISE) != (tried > now):
        return None
    where = "--hpa-behavior" if lever.setting in WINDOWS else "--config defaults:"
    return {"setting": lever.setting, "in": where, "direction": lever.direction, "now": _number(now),
            "try": _number(tried), "costs": lever.costs, "why": lever.why,
            "command": rerun.command(lever.setting, tried)}


def _highest_floor(rerun: Rerun) -> int:
    """The most skew-aware's floor can be raised to: its own ceiling, the policy file's `max_replicas` where set
    (the HPA's maxReplicas above it), and never past what the adapter serves. Doubled up to the HPA's alone,
    "raise min_replicas 3 -> 6" was advised under `max_replicas: 4`, a policy file the compare command's run
    refused ("max_replicas must be null or >= min_replicas")."""
    own = rerun.policy.max_replicas
    return min(rerun.max_replicas, PROPOSAL_LIMIT, own if own is not None else PROPOSAL_LIMIT)


def _number(value: float) -> float | int:
    return int(value) if value == int(value) else value


def advice(report: Mapping[str, Any], rerun: Rerun | None, measure: Measure | None = None) -> list[dict[str, Any]]:
    """report.json's `advice`: for each part of the goal skew-aware missed, the settings that moved it on this
    trace, the most first (`settings`, each with what it `measured`), those tried that did not (`not_moved`), or
    why none can (`instead`), and where ModelMesh's untimed copies delayed requests, that fix (`first`); empty
    where it met the goal, or was not judged. Without `measure` (`--advice off`) the candidates are listed as
    they are, unmeasured."""
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
        first = _stuck_fix(report, rerun) if part == "delayed" else None
        entries.append({"part": part, "settings": settings, "not_moved": [], "instead": instead,
                        "measured": measure is not None and bool(settings), "first": first})
    tried = [s for entry in entries for s in entry["settings"]]
    if measure is None or not tried:
        return entries
    replays = iter(measure(tried))
    base = report["policies"][POLICY]
    for entry in entries:
        outcomes = [(s, _measured(base, next(replays), entry["part"])) for s in entry["settings"]]
        for setting, measured in outcomes:
            setting["measured"] = measured
        moved = sorted((s for s, m in outcomes if m["moved"]), key=lambda s: s["measured"]["after"])
        entry["settings"], entry["not_moved"] = moved, [s for s, m in outcomes if not m["moved"]]
    return entries


def _measured(base: Mapping[str, Any], after: Mapping[str, Any], part: str) -> dict[str, Any]:
    """What a replay with one setting changed did: the missed part's figure and goal ratio before and after,
    whether it `moved` (down by MOVED or more), and every other part's and the scale events, before and after,
    with whether a part met before is now missed, and what the move rests on (`evidence`)."""
    def part_of(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
        return {"figure": entry[FIELDS[key]], "ratio": entry["goal"][key], "met": entry["goal"]["parts"][key]["met"]}

    before, now = part_of(base, part)["figure"], part_of(after, part)["figure"]
    events = {"before": base["scale_events"], "after": after["scale_events"]}
    return {"before": before, "after": now, "moved": now <= before * (1.0 - MOVED) and now < before,
            "parts": {key: {"before": part_of(base, key), "after": part_of(after, key)} for key in LABELS},
            "scale_events": events, "evidence": evidence(part, before, now, events)}


def _stuck_fix(report: Mapping[str, Any], rerun: Rerun) -> dict[str, Any] | None:
    """Where some policy's copies were stuck untimed (the report's --queue-untimed warning, stuck_copies.py), the
    fix that is ModelMesh's, not a replica policy's: the annotation (replayed timed) or a lower threshold."""
    cluster = report["cluster"]
    policies = report["policies"].values()
    stuck = any(p.get("untimed_stuck_requests") for p in policies)
    crowded = any(p.get("untimed_crowded_requests") for p in policies)
    if cluster.get("queue_timed", True) or not (stuck or crowded):
        return None
    low, high = SCALEUP_RPM_RANGE
    rpm = int(cluster["pod_rps"] * 60)
    threshold = (f", or set MM_SCALEUP_RPM_THRESHOLD to {rpm} rpm, what a pod serves (replay: --scaleup-rpm "
                 f"{rpm})" if stuck and low <= rpm <= high and rpm < cluster["scaleup_rpm"] else "")
    if crowded:  # copies each under what a pod serves, together over it: only a lower threshold still copies them
        threshold += ", or MM_SCALEUP_RPM_THRESHOLD at the rate the crowded pods' warning names (--scaleup-rpm)"
    # With the bound's run where this one had it: the delay part's "out of reach" is this untimed run's bound, and
    # printed after the timed command it read as that command's (0.795x untimed, where the timed run had 0.147x)
    bound = "bound" in report
    replayed = "fixed-max beside both policies: its Bound line is the timed one" if bound else "both policies"
    return {"text": f"first, ModelMesh's untimed copies held requests on pods that could not serve them (the "
                    f"--queue-untimed warning): annotate the ServingRuntime perModelConcurrencyLimit so that "
                    f"ModelMesh times the queue (replayed timed by the command below, {replayed}){threshold}",
            "command": rerun.cluster_command("timed", drop=("--queue-untimed", "--scaleup-rpm"), bound=bound)}


def _out_of_reach(report: Mapping[str, Any], part: str) -> str | None:
    """Why no setting moves `part` to the goal, where the report knows it: the bound's delays above the goal, or
    the goal's pod-hours below what the models in use (or the requests) need."""
    bound = report.get("bound")
    if part == "delayed" and bound is not None and bound.get("delay_goal_reachable") is False:
        return (f"out of reach of any replica policy: fixed-max, every pod maxReplicas allows throughout the trace, "
                f"delays {ratio_text(bound['delayed_vs_mean-hpa'])} mean-hpa's, above the goal's "
                f"{delay_limit(bool(bound.get('quiet_baseline'))):g}x "
                f"(the Bound line says what is left)")
    note = report.get(FIELD)
    if part == "pod_hours" and note is not None:
        means = "cold loads on models in use" if note["short_of"] == "models_in_use" else "delayed requests"
        return (f"the goal's {POD_HOURS:g}x mean-hpa's pod-hours is {ratio_text(note['goal_vs_cache_oracle'])} the "
                f"cache oracle: fewer pod-hours means {means}")
    return None


SHORT: Final = {"pod_hours": "pod-hours", "delayed": "delays", "avoidable_cold_loads": "avoidable cold loads"}


def advice_text(report: Mapping[str, Any]) -> str | None:
    """The advice in words, printed under the goal's verdict and in report.md: per part missed, each setting that
    moved it on this trace with what it did, the most first, those that did not, and the command that compares
    the best."""
    entries = report.get("advice")
    if not entries:
        return None
    measured = any(entry.get("measured") for entry in entries)
    listed = any(entry["settings"] for entry in entries)  # unmeasured: --advice off
    lines = [f"What to change ({POLICY}; keys go under `defaults:` in the --config file"
             + (f"; each replayed on this trace, {POLICY} alone with the setting, against mean-hpa's run as it was):"
                if measured else "; not measured on this trace (--advice off): each moved its part in the "
                "simulator's tests; compare to see what it does here):" if listed else "):")]
    for entry in entries:
        label = LABELS[entry["part"]]
        first = entry.get("first")
        if first:
            lines += [f"- {label}: {first['text']}", f"  compare: {first['command']}"]
            label = f"  then, {label}"
        else:
            label = f"- {label}"
        if entry["instead"]:
            # after ModelMesh's fix, whose command replays timed: the figure here is this untimed run's, said so
            said = (f"timed, the Bound line of that command's report says whether a replica policy reaches it; as "
                    f"this run ran, untimed: {entry['instead']}" if first else entry["instead"])
            lines.append(f"{label}: {said}")
            continue
        if not entry["settings"] and not entry.get("not_moved"):
            lines.append(f"{label}: no setting of {POLICY} to try here")
            continue
        if not entry.get("measured"):
            named = "; ".join(f"{_step(s)} (costs {LABELS[s['costs']]})" for s in entry["settings"])
            lines += [f"{label}: {named}", f"  compare: {entry['settings'][0]['command']}"]
            continue
        tried = "; ".join(f"{_step(s)} ({_figure(s['measured']['before'])} -> {_figure(s['measured']['after'])})"
                          for s in entry["not_moved"])
        if not entry["settings"]:
            lines.append(f"{label}: none of the settings tried moved it by {MOVED:.0%} or more on this trace: "
                         f"{tried}")
            continue
        lines.append(f"{label}:")
        for s in entry["settings"]:
            lines.append(f"  {_step(s)}: {_effect(entry['part'], s['measured'])}")
            caveat = caveat_text(s["measured"].get("evidence", {}))
            if caveat is not None:
                lines.append(f"    {caveat}")
        if tried:
            lines.append(f"  did not move it by {MOVED:.0%}: {tried}")
        lines.append(f"  compare (mean-hpa as it ran): {entry['settings'][0]['command']}")
    return "\n".join(lines)


def _step(setting: Mapping[str, Any]) -> str:
    return f"{setting['direction']} {_named(setting)} {setting['now']:g} -> {setting['try']:g}"


def _figure(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _effect(part: str, measured: Mapping[str, Any]) -> str:
    """"delays 10,247 -> 1,752 (0.368x -> 0.063x mean-hpa's, met); costs pod-hours 86.6 -> 101.2 (1.05x ->
    1.22x, now missed), scale events 40 -> 38": the part moved, then the other parts and the scale events."""
    parts = measured["parts"]

    def moved(key: str) -> str:
        before, after = parts[key]["before"], parts[key]["after"]
        verdict = ("met" if after["met"] else "now missed" if before["met"] else "missed") if key == part else (
            "now missed" if before["met"] and not after["met"] else "met" if after["met"] else "missed")
        ratios = ("" if before["ratio"] is None and after["ratio"] is None else  # mean-hpa had none
                  f"{ratio_text(before['ratio'])} -> {ratio_text(after['ratio'])} mean-hpa's, ")
        return f"{SHORT[key]} {_figure(before['figure'])} -> {_figure(after['figure'])} ({ratios}{verdict})"

    events = measured["scale_events"]
    others = [moved(key) for key in LABELS if key != part]
    return (f"{moved(part)}; then {', '.join(others)}, scale events {events['before']:,} -> {events['after']:,}")


def _named(setting: Mapping[str, Any]) -> str:
    return f"{setting['setting']} (--hpa-behavior)" if setting["in"] == "--hpa-behavior" else setting["setting"]
