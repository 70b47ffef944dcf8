"""The report in words: the table `simulate` prints and report.md opens with, the goal's verdict, the bound, the
cache oracle's note, the loads' waits, report.md, report.json's text and timeline.png's title."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from autoscaler.simulation.advice import advice_text
from autoscaler.simulation.figures import hours_column, hours_text, ratio_text
from autoscaler.simulation.goal import (
    COLD,
    DELAYED,
    LABELS,
    POD_HOURS,
    QUIET_RATIO,
    QUIET_SLACK,
    delay_limit,
    goal_word,
)
from autoscaler.simulation.goal_ceiling import goal_ceiling_text
from autoscaler.simulation.rate_check import DEFAULT_SCALEUP_RPM
from autoscaler.simulation.report import BASELINE, MOVED_WORDS
from autoscaler.simulation.run_size import BUSY
from autoscaler.simulation.stuck_baseline import stuck_text


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
