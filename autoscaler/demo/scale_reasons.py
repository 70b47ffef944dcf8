"""Why the demo's HPA scaled, in the words its scale line adds: the adapter's own account, from its /debug.

Why: "HPA: modelmesh_desired_replicas proposes 7; scale up 5 -> 7" named no reason, though the README says each
scale says why. The adapter's /debug document for the runtime names the term that decided (`winner`), each term's
proposal, and for a value served above its raw one the slow scale-down that holds it (`falling`); this only reads
them, it decides nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from autoscaler.names import ServedMetric

SIGNAL_TERMS: Final = ("gpu", "requests", "queue", "cache")
"""The adapter's terms that read a signal (`recommendation.TERMS` less its floors), in its order."""

WHAT_IT_READS: Final = {
    "gpu": "GPU busy",
    "requests": "the skew-aware request load",
    "queue": "the queue delay",
    "cache": "the cache's fill",
}


def served_replicas(debug: Mapping[str, Any] | None) -> float | None:
    """The replica count the adapter serves, from its /debug document (`values`), None where it serves none.

    The HPA reads it from the same document its line's reason comes from: read in two requests (the metrics API,
    then /debug), the value and its reason could come from two refreshes of the adapter."""
    if not debug or not isinstance(debug.get("values"), dict):
        return None
    value = debug["values"].get(ServedMetric.DESIRED_REPLICAS.value, {}).get("value")
    return float(value) if isinstance(value, int | float) else None


def why_scaled(debug: Mapping[str, Any] | None, missed: str = "did not answer") -> str:
    """`the adapter's requests term proposes 7: the skew-aware request load, 668 req/s at 100 a pod; queue 5,
    cache 3`, with what holds a served value above its raw one (the slow scale-down, or a hold `held` names); the
    adapter's reason where it decides nothing (no winner: too few fresh pods, say). Where /debug gave no document
    (`missed` says how: late with 2 cores busy, say), that why is unknown this time and that the count is the
    metrics API's: "/debug did not answer: no reason to show" read as the adapter's own account, no term deciding."""
    if not debug:
        return f"the adapter's /debug {missed}: why it scaled is unknown this time; the count is the metrics API's"
    if not isinstance(debug.get("proposals"), dict):
        return "the adapter's /debug named no terms: why it scaled is unknown this time"
    if debug.get("winner") is None:
        return f"the adapter decides nothing now: {debug.get('reason') or 'no term proposes a count'}"
    proposals: dict[str, int | None] = debug["proposals"]
    winner = str(debug["winner"])
    said = _decided(winner, proposals, debug)
    others = [f"{term} {proposals[term]}" for term in SIGNAL_TERMS
              if term != winner and proposals.get(term) is not None]
    if others:
        said += f"; {', '.join(others)}"
    return said + _above_raw(debug)


def _above_raw(debug: Mapping[str, Any]) -> str:
    """What keeps the served value above the raw recommendation, in the adapter's terms; empty where nothing does."""
    desired = ServedMetric.DESIRED_REPLICAS.value
    value = debug.get("values", {}).get(desired, {})
    served, raw = value.get("value"), value.get("raw")
    if served is None or raw is None or not served > raw:
        return ""
    if falling := (debug.get("falling") or {}).get(desired):
        return (f"; the adapter's slow scale-down serves {served:g} meanwhile, an earlier count smoothed "
                f"{falling.get('smoothed', 0):.2f} falling to {raw:g} with scale_down_tau_s "
                f"{falling.get('scale_down_tau_s', 0):g}")
    if held := (debug.get("held") or {}).get(desired):
        return f"; the adapter holds {served:g}: {held}"
    return ""


def _decided(winner: str, proposals: Mapping[str, int | None], debug: Mapping[str, Any]) -> str:
    """The deciding term and its proposal, with what it reads (for the request term: the load and target)."""
    if winner == "max_replicas":
        largest = max((t for t in SIGNAL_TERMS if proposals.get(t) is not None),
                      key=lambda t: proposals[t] or 0, default=None)
        cap = debug.get("values", {}).get(ServedMetric.DESIRED_REPLICAS.value, {}).get("raw")
        cut = f" cuts its {largest} term's {proposals[largest]}" if largest else ""
        return f"the adapter's max_replicas{'' if cap is None else f' {cap:g}'}{cut}"
    said = f"the adapter's {winner} term proposes {proposals.get(winner)}"
    if winner == "requests":
        load = debug.get("values", {}).get(ServedMetric.REQUEST_LOAD.value, {}).get("raw")
        target = debug.get("policy", {}).get("target_rps_per_pod", {}).get("value")
        if load is not None and target:
            said += f": {WHAT_IT_READS[winner]}, {load:.0f} req/s at {target:g} a pod"
    elif winner in WHAT_IT_READS:
        said += f": {WHAT_IT_READS[winner]}"
    return said
