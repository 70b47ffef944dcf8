"""What a simulation run leaves behind: `report.json`, `report.md` (the table also printed), `timeline.png`.

The plot uses matplotlib, imported only here and only when a plot is drawn, so the adapter itself never
loads it (it is the `simulate` extra: `pip install modelmesh-autoscaler[simulate]`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from autoscaler.simulation.advice import advice, advice_text
from autoscaler.simulation.engine import Oracle, PolicyResult
from autoscaler.simulation.figures import figure, hours_column, hours_text, ratio_figure, ratio_text
from autoscaler.simulation.goal import (
    COLD,
    DELAYED,
    LABELS,
    POD_HOURS,
    QUIET_RATIO,
    QUIET_SLACK,
    delay_limit,
    goal_word,
    judge,
)
from autoscaler.simulation.goal_ceiling import FIELD, goal_ceiling_note, goal_ceiling_text
from autoscaler.simulation.policies import MEAN_TARGET_PERCENT
from autoscaler.simulation.rate_check import DEFAULT_SCALEUP_RPM
from autoscaler.simulation.rerun import Rerun
from autoscaler.simulation.run_size import BUSY
from autoscaler.simulation.stuck_baseline import stuck_note, stuck_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


def table(report: Mapping[str, Any]) -> str:
    """The comparison as a Markdown table, with the ratios against mean-hpa the goal counts where it ran: the
    cold loads' ratio was of all cold loads, read "1x" where the goal's, of the avoidable ones, was 0."""
    rows = [f"| policy | pod-hours | x oracle | delayed | delayed ratio | cold loads (avoidable) | {MOVED_WORDS} "
            f"| overloaded s | scale events | vs {BASELINE}: pod-hours / delayed / avoidable cold loads | goal |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    oracle = report["oracle_pod_hours"]
    policies = report["policies"]
    hours = hours_column([p["pod_hours"] for p in policies.values()])
    for (name, p), pod_hours in zip(policies.items(), hours, strict=True):
        goal = p.get("goal")
        versus = "—" if goal is None else " / ".join(ratio_text(goal[key]) for key in LABELS)
        times = p["pod_hours"] / oracle if oracle else 0.0
        rows.append(f"| {name} | {pod_hours} | {times:.2f} | {p['delayed_requests']} | "
                    f"{p['delayed_ratio']:.4f} | {p['cold_loads']} ({p['avoidable_cold_loads']}) | "
                    f"{p['migrated_loads']} | {p['overloaded_seconds']:g} | {p['scale_events']} | {versus} | "
                    f"{'—' if goal is None else goal_column(goal)} |")
    return "\n".join(rows)


FAILED_BASELINE: Final = 0.01
"""A share of mean-hpa's requests failed from which the goal's verdict says its ratios measure against a
runtime that did not serve its load."""


def goal_column(goal: Mapping[str, Any]) -> str:
    """The table's goal column of report.json's `goal`: "met", or which parts missed (`goal.goal_word`)."""
    return goal_word(key for key, part in goal["parts"].items() if not part["met"])


def goal_text(report: Mapping[str, Any]) -> str | None:
    """Each policy's verdict on the goal, part by part with its ratio, from report.json's `goal` (None without
    mean-hpa): printed and in report.md, where it was only in report.json."""
    judged = [(name, p) for name, p in report["policies"].items() if "goal" in p]
    if not judged:
        return None
    lines = [f"Goal against {BASELINE} (at most {POD_HOURS:g}x its pod-hours, {DELAYED:g}x its delayed requests "
             f"({QUIET_SLACK:g}x where it delays under {QUIET_RATIO:.1%} of requests) and {COLD:g}x its avoidable "
             f"cold loads):"]
    for name, p in judged:
        goal = p["goal"]
        parts = "; ".join(part_text(key, goal[key], part, p) for key, part in goal["parts"].items())
        lines.append(f"- {name}: {'met' if goal['met'] else 'missed'}: {parts}")
    base = report["policies"].get(BASELINE, {})
    failed = base.get("refused_requests", 0) / base["requests"] if base.get("requests") else 0.0
    if failed >= FAILED_BASELINE:  # the diurnal days: pod-hours 3.7x "missed" against a runtime failing 60%
        lines.append(f"- {BASELINE} failed {failed:.0%} of the requests (refused loads, every cache full): a failed "
                     f"request puts no load on a pod and loads no model, so its pod-hours and cold loads are no "
                     f"baseline for a policy that serves them")
    return "\n".join(lines)


def part_text(key: str, ratio: float | None, part: Mapping[str, Any], policy: Mapping[str, Any]) -> str:
    """One part of the goal in words: "delayed requests 0.542x (at most 0.1x: missed)"."""
    verdict = "met" if part["met"] else "missed"
    if ratio is None:  # mean-hpa had none: no ratio, and met only by having none too
        had = "delayed none" if key == "delayed" else f"had no {LABELS[key][:-1]}"
        count = policy["delayed_requests" if key == "delayed" else key]
        return f"{LABELS[key]} n/a ({BASELINE} {had}, this policy {count}: {verdict})"
    quiet = key == "delayed" and part["limit"] > DELAYED  # mean-hpa barely delays: the goal asks less
    why = f", {BASELINE} delaying under {QUIET_RATIO:.1%} of requests" if quiet else ""
    return f"{LABELS[key]} {ratio_text(ratio)} (at most {part['limit']:g}x{why}: {verdict})"


def trace_text(trace: Mapping[str, Any]) -> str:
    """The trace as report.md's first line and timeline.png's title give it."""
    return (f"{trace['source']}: {trace['models']} models, {hours_text(trace['hours'])} h in "
            f"{trace['interval_s']:g} s intervals, {trace['requests']} requests")


def cluster_text(cluster: Mapping[str, Any]) -> str:
    """The cluster's shape as report.md's first line and timeline.png's title give it; untimed (--queue-untimed),
    with the flat threshold ModelMesh copies at (a timed run, an untimed one and one at --scaleup-rpm 1080 read the
    same, though untimed delays far more)."""
    text = (f"{cluster['pod_rps']:g} req/s per pod, {cluster['cache_models']} model copies per pod, load "
            f"{cluster['load_time_s']:g} s ({cluster.get('load_concurrency', 1)} at a time), start-up "
            f"{cluster['startup_delay_s']:g} s, replicas {cluster['min_replicas']}..{cluster['max_replicas']}, "
            f"queueing SLO {cluster['slo_queue_ms']:g} ms")
    if cluster.get("queue_timed", True):
        return text
    rpm = cluster.get("scaleup_rpm", DEFAULT_SCALEUP_RPM)
    flag = " (--scaleup-rpm)" if rpm != DEFAULT_SCALEUP_RPM else ""
    return text + f", queue untimed (no perModelConcurrencyLimit): another copy only at {rpm} rpm a copy{flag}"


def timeline_title(report: Mapping[str, Any]) -> str:
    """timeline.png's title: which trace on which cluster, as report.md says them (a PNG passed around alone
    said neither)."""
    return f"{trace_text(report['trace'])}\n{cluster_text(report['cluster'])}"


def markdown(report: Mapping[str, Any]) -> str:
    trace, cluster = report["trace"], report["cluster"]
    lines = [
        "# Simulation report",
        "",
        f"Trace: {trace_text(trace)}. Cluster: {cluster_text(cluster)}.",
        "",
        f"Oracle pod-hours: {hours_text(report['oracle_pod_hours'])} (every pod at full capacity); with the "
        f"cache: {hours_text(report['cache_oracle_pod_hours'])}. Cold loads no policy avoids (models first "
        f"requested after the warm start): {report['unavoidable_cold_loads']}.",
        "",
        table(report),
        "",
    ]
    if goal := goal_text(report):
        lines += [goal, ""]
    if changes := advice_text(report):
        lines += [changes, ""]
    if stuck := stuck_text(report, BASELINE):
        lines += [stuck, ""]
    if cache := cache_text(report):
        lines += [cache, ""]
    if ceiling := goal_ceiling_text(report, BASELINE):
        lines += [ceiling, ""]
    if report.get("warnings"):
        lines += ["Warnings (how the run read what it was given):", "",
                  *(f"- {warning}" for warning in report["warnings"]), ""]
    if "bound" in report:
        lines += [bound_text(report), ""]
    for name, p in report["policies"].items():
        lines.append(f"- **{name}**: {p['description'].removeprefix(f'{name}: ')}")  # it starts with the name
        if p.get("refused_requests"):  # counted delayed too; said apart, being errors the clients saw
            churn = cluster.get("min_churn_age_s", 300)
            lines.append(f"  - {p['refused_requests']} requests failed (of the delayed): every pod's cache full "
                         f"with copies used within the last {churn:g} s, each refused the model's load, as "
                         f"ModelMesh answers \"Cache churn threshold exceeded\"")
        if waits := waits_text(p, cluster.get("load_concurrency", 1)):
            lines.append(f"  - {waits}")
        if p["terms"]:
            terms = ", ".join(f"{k} {v}" for k, v in sorted(p["terms"].items(), key=lambda kv: -kv[1]))
            lines.append(f"  - term that decided the recommendation, per refresh: {terms}")
    return "\n".join(lines) + "\n"


NEVER_RAN_WORDS: Final = {"evicted": "evicted from a full cache before their turn",
                          "pod_removed": "on a pod a scale-down removed before their turn",
                          "queued_at_end": "still queued when the trace ended"}
"""Why a cold load never got a loading thread, in the waits line's words (report.json's `cold_loads_never_ran`)."""


def waits_text(policy: Mapping[str, Any], threads: int) -> str | None:
    """The loads' waits for a loading thread in words (None: no load was asked for). The cold loads' part says
    which of the table's cold loads it counts where a thread never took some (`cold_loads_never_ran`): "11761 cold
    loads" under a table of 13,290 read as two counts of one thing."""
    waits = policy.get("load_waits_s")
    if not waits:
        return None
    cold, copies = waits["cold_loads"], waits["copies"]
    unrun = {why: n for why, n in policy.get("cold_loads_never_ran", {}).items() if n}
    parts = []
    if cold["loads"] or unrun:
        counted = f"{cold['loads']} cold loads"
        if unrun:
            whys = ", ".join(f"{n} {NEVER_RAN_WORDS[why]}" for why, n in unrun.items())
            counted = (f"{cold['loads']} of the {policy['cold_loads']} cold loads ({sum(unrun.values())} never got "
                       f"one: {whys})")
        parts.append(counted + (f": {timings(cold)}" if cold["loads"] else ""))
    if copies["loads"]:
        parts.append(f"{copies['loads']} copies: {timings(copies)}")
    if not parts:
        return None
    return f"waited for a loading thread ({threads} a pod): " + "; ".join(parts)


def timings(waits: Mapping[str, Any]) -> str:
    """A `wait_summary` in words: "mean 5 s, p95 10 s, longest 10 s"."""
    return f"mean {waits['mean']:g} s, p95 {waits['p95']:g} s, longest {waits['max']:g} s"


CACHE_SIZED = 1.5
"""Where the cache oracle is past this many times the requests' and the models in use need more than one pod,
the models in use size the runtime."""


def cache_text(report: Mapping[str, Any]) -> str | None:
    """Pod-hours against the cache oracle, where holding the models in use takes far more pods than serving
    their requests (a trace of many quiet models, Azure Functions' shape): "x oracle" divides by the requests'
    oracle, and read 58x for a policy within 1.1x of what holding the models takes.

    Not where the models fit in one pod: the cache oracle is then more only because it holds a model for
    `target_lru_age_s` after its use while the requests' oracle counts no pod in an idle interval, and a trace
    of one model, quiet 18 minutes in 20, was said to be sized by its models."""
    oracle, cache = report["oracle_pod_hours"], report["cache_oracle_pod_hours"]
    cluster = report["cluster"]
    if not oracle or cache <= CACHE_SIZED * oracle or cluster.get("peak_models", 0) <= cluster["cache_models"]:
        return None
    against = ", ".join(f"{name} {p['pod_hours'] / cache:.2f}x" for name, p in report["policies"].items())
    return (f"The models in use, not the requests, size this runtime: holding them takes {hours_text(cache)} "
            f"pod-hours (the cache oracle), {cache / oracle:.3g}x the requests' oracle that `x oracle` divides by; "
            f"against it: {against}.")


def bound_text(report: Mapping[str, Any]) -> str:
    """The bound in words: what no replica policy beats, and whether the delay goal is within reach."""
    bound = report["bound"]
    delayed = bound["delayed_requests"]
    requests = "request is" if delayed == 1 else "requests are"
    text = (f"Bound: with every pod maxReplicas allows ({bound['replicas']}) throughout the trace, {delayed} "
            f"{requests} delayed (ratio {bound['delayed_ratio']:.4f}; {bound['delayed_waiting_for_loads']} of "
            f"them waited for a load): {_fewest_text(report, delayed)}")
    versus = bound.get(f"delayed_vs_{BASELINE}")
    if versus is None:
        return text
    quiet = bool(bound.get("quiet_baseline"))
    limit = f"{delay_limit(quiet):g}x" + (f" ({BASELINE} delaying under {QUIET_RATIO:.1%} of requests)"
                                          if quiet else "")
    if bound["delay_goal_reachable"]:
        text += f" That is {ratio_text(versus)} {BASELINE}'s delays: the goal's {limit} is within reach."
        if bound.get("quiet_baseline"):  # (README, Simulator: one shift of load can decide a ratio of so few)
            text += (f" {BASELINE} delays under {QUIET_RATIO:.1%} of requests: a few minutes decide a ratio of "
                     f"delays there, and where ModelMesh's copies sit when the load shifts, not the replica count, "
                     f"can put it above 1x, so the goal asks only that a policy delay at most "
                     f"{QUIET_SLACK - 1:.0%} more.")
        return text
    text += f" That is {ratio_text(versus)} {BASELINE}'s delays, above the goal's {limit}: "
    cluster = report["cluster"]
    maximum, holding = cluster["max_replicas"], cluster.get("peak_pods", 0)
    # Short of pods for the requests, not of copies; where holding the models needs more still, that is said
    # (a day of 5,000 quiet models at --max-replicas 10: 19 pods for requests, 31 for the cache, 83% refused)
    if cluster["fixed_replicas"] > maximum and not holding > cluster["fixed_replicas"]:
        return (text + f"maxReplicas ({cluster['max_replicas']}) is below the {cluster['fixed_replicas']} pods "
                f"the peak needs at {BUSY:.0%} busy, so the delays left wait for pods it does not allow: raise "
                f"--max-replicas to see what ModelMesh's copies leave.")
    if holding > maximum:  # short of pods to hold the models in use
        return (text + f"maxReplicas ({cluster['max_replicas']}) is below the {cluster['peak_pods']} pods the peak "
                f"needs to hold the models it uses (those used within target_lru_age_s, at {cluster['cache_models']} "
                f"copies a pod), so ModelMesh refuses loads and evicts models still in use: raise --max-replicas "
                f"to see what its copies leave.")
    if bound.get("untimed_stuck_requests") or bound.get("untimed_crowded_requests"):  # (stuck_copies.py)
        return (text + f"untimed, ModelMesh never copies a model whose copies each take more than a pod serves, or "
                f"together with another copy on their pod, but under {cluster.get('scaleup_rpm', 2000)} rpm (the "
                f"warnings name them), and the delays left wait for those pods and for cold loads: no replica policy "
                f"removes them.")
    return (text + "the delays left wait for ModelMesh to copy hot models (its rate check) and to load cold "
            "ones, not for pods, and no replica policy removes them.")


def _fewest_text(report: Mapping[str, Any], delayed: int) -> str:
    """Whether the bound's delays are the fewest of the report's: a policy on fewer pods delaying fewer (a 1 s
    trace at --tick 1: fixed's 13 pods delayed 13,657, the bound's 20 pods 15,286) is named, where the sentence
    said the bound was about the fewest any policy gets beside the table that showed otherwise."""
    fewer = [(policy["delayed_requests"], name) for name, policy in report.get("policies", {}).items()
             if policy["delayed_requests"] < delayed]
    if not fewer:
        return "about the fewest any replica policy within these bounds gets."
    count, name = min(fewer)
    return (f"yet {name} delayed fewer ({count}) on no more pods, so more pods are no sure way to fewer delays "
            "here: where ModelMesh's copies sit and when models load decide more of them than the replica count.")


def json_text(report: Mapping[str, Any]) -> str:
    """report.json's text."""
    return json.dumps(report, indent=2) + "\n"


def _downsample(values: Sequence[float], group: int, how: str) -> list[float]:
    out = []
    for i in range(0, len(values), group):
        chunk = values[i:i + group]
        out.append(max(chunk) if how == "max" else sum(chunk))
    return out


FEW_POINTS = 30
"""Under this many points a panel marks each one: a line alone shows nothing of one or two."""


def load_steps(interval_s: float, load_rps: Sequence[float]) -> tuple[list[float], list[float]]:
    """The load panel's points in hours, drawn as steps: each interval's rate held from its start to the next
    one's, and the last to the trace's end. A line through the starts put each change an interval early and
    cut the last interval off the axis."""
    hours = [interval_s * i / 3600.0 for i in range(len(load_rps) + 1)]
    return hours, [*load_rps, *load_rps[-1:]]


COLORS: Final = {"fixed": "tab:blue", "fixed-max": "tab:orange", "mean-hpa": "tab:green", "skew-aware": "tab:red"}
"""Each policy's colour in every panel, whichever policies a run has (--policies)."""
OTHER_COLORS: Final = ("tab:purple", "tab:brown", "tab:pink", "tab:olive")
REFERENCES: Final = ("fixed", "fixed-max")
"""The policies drawn for reference: thin and dashed, over the others. Drawn first and widest, fixed's and
fixed-max's lines at 0 hid the autoscaled policies' few delays and cold loads under a band 6 points high."""
WIDTHS: Final = (3.6, 1.8, 1.0)
"""Line widths of the autoscaled policies in the order drawn, widest first: a line drawn over an equal one is
narrower, so each shows a band of its colour (fixed was hidden under skew-aware, and the cold-loads panel, equal
for all four, showed only skew-aware's)."""
REFERENCE_STYLES: Final = ((1.8, (0, (3, 5))), (1.8, (4, (3, 5))))
"""Width and dash pattern of the reference policies, drawn over the others in that order: short dashes, the
second's in the first's gaps, so where all are equal each shows, and half of what lies under them shows between."""


def policy_style(index: int, name: str, reference: bool = False) -> dict[str, Any]:
    """How the `index`th policy drawn of its group (autoscaled, or `reference`) is drawn: its colour, a width that
    shows it under the lines drawn after it, and a line style (solid; reference lines dashed, above the others)."""
    color = COLORS.get(name, OTHER_COLORS[index % len(OTHER_COLORS)])
    if reference:
        width, style = REFERENCE_STYLES[min(index, len(REFERENCE_STYLES) - 1)]
        return {"color": color, "linewidth": width, "linestyle": style, "zorder": 3}
    return {"color": color, "linewidth": WIDTHS[min(index, len(WIDTHS) - 1)], "linestyle": "-", "zorder": 2}


def drawing_order(results: Sequence[PolicyResult]) -> list[tuple[PolicyResult, dict[str, Any]]]:
    """Each policy with its style, in the order drawn: the autoscaled ones, then the references over them."""
    lead = [r for r in results if r.name not in REFERENCES]
    references = [r for r in results if r.name in REFERENCES]
    return ([(r, policy_style(i, r.name)) for i, r in enumerate(lead)]
            + [(r, policy_style(i, r.name, reference=True)) for i, r in enumerate(references)])


def point_seconds(t_s: Sequence[float], group: int, interval_s: float) -> float:
    """How many seconds each plotted point of a count adds up: the timeline's step times the points summed."""
    step = t_s[1] - t_s[0] if len(t_s) > 1 else interval_s
    return step * group


def timeline_figure(interval_s: float, load_rps: Sequence[float], results: Sequence[PolicyResult],
                    title: str = "") -> Figure:
    """Load, replicas per policy, delayed requests and cold loads over time, in four panels, each policy
    visible where it equals another, whole-number ticks on the counts, each axis with its unit, one legend
    for the three policy panels, and `title` (the trace and the cluster: `timeline_title`) above them."""
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # font cache chatter is not ours to log
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True, constrained_layout=True)
    hours, rates = load_steps(interval_s, load_rps)
    dots = "o" if len(hours) < FEW_POINTS else None  # a line through one point draws nothing
    axes[0].step(hours, rates, where="post", color="black", linewidth=0.8, marker=dots, markersize=3)
    axes[0].set_ylabel("load (requests/s)")
    seconds = interval_s
    drawn: dict[str, Any] = {}
    for result, style in drawing_order(results):
        tl = result.timeline
        group = max(1, len(tl.t_s) // 600)
        seconds = point_seconds(tl.t_s, group, interval_s)
        t = [x / 3600.0 for x in tl.t_s[::group]]
        if len(t) < FEW_POINTS:  # the references' points as rings around the others': the same point shows both
            ring = style["zorder"] > 2
            style |= {"marker": "o", "markersize": 7 if ring else 3} | ({"markerfacecolor": "none"} if ring else {})
        style["label"] = result.name
        [drawn[result.name]] = axes[1].step(t, _downsample(tl.replicas, group, "max"), where="post", **style)
        axes[2].plot(t, _downsample(tl.delayed, group, "sum"), **style)
        axes[3].plot(t, _downsample(tl.cold_loads, group, "sum"), **style)
    if hours:
        axes[3].set_xlim(left=min(0.0, hours[0]))  # time starts at 0: one point was centred on a negative axis
    axes[1].set_ylabel("replicas (pods)")
    axes[2].set_ylabel(f"delayed requests\nper {seconds:g} s interval")
    axes[3].set_ylabel(f"cold loads\nper {seconds:g} s interval")
    axes[3].set_xlabel("time (hours)")
    for ax in axes[1:]:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: 0.2 of a cold load means nothing
        low, high = ax.get_ylim()
        if high - low < 2:  # an axis of one count held no two whole numbers, and its ticks read 2.84, 2.88, ...
            ax.set_ylim(low, low + 2)
    if results:  # once for the three panels (it was beside each), beside them, never over lines; in --policies order
        names = [r.name for r in results]
        fig.legend([drawn[name] for name in names], names, loc="outside right upper", fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig


def plot_timeline(path: Path, interval_s: float, load_rps: Sequence[float], results: Sequence[PolicyResult],
                  title: str = "") -> None:
    """`timeline_figure` written to `path` (its suffix picks the format)."""
    import matplotlib.pyplot as plt

    fig = timeline_figure(interval_s, load_rps, results, title)
    fig.savefig(path, dpi=90)
    plt.close(fig)
