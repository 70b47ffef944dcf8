"""Whether a setting's measured move rests on enough of the trace to go by, and the caveat where it does not.

An hour of 50 models advised `raise scale_down_tau_s 300 -> 600` on 143 delayed requests and one scale event, in
the same words as a day's advice resting on fifty. The advice is still given (it is what the trace showed), with
a caveat where the evidence is thin.

The rule: a replica setting moves delays and pod-hours where the replicas change, so the events behind a move
of either are skew-aware's scale events, the more of the run's and the replay's; behind a move of avoidable cold
loads, those loads, the more of the two. Fewer than `THIN` (1 / MOVED, 20) of them and one event is more than
the 5% a setting must move its part to be advised: one burst landing otherwise could undo the move.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

MOVED: Final = 0.05
"""The least share of the missed part's figure a setting must take off to be advised (advice.py): `cache_full_ratio`
moved a trace's cold loads by 0.4%, which is no advice. Here because the rule for thin evidence derives from it."""

THIN: Final = round(1 / MOVED)
"""Fewer events than this behind a move, and one of them is more than the MOVED share it is advised on."""

COLD: Final = "avoidable_cold_loads"


def evidence(part: str, before: float, after: float, scale_events: Mapping[str, int]) -> dict[str, Any]:
    """What a measured move of `part` (`before` -> `after`) rests on: the events (`kind`) in the run and in the
    replay, and whether they are fewer than THIN, for report.json."""
    kind, run, replay = ((COLD, int(before), int(after)) if part == COLD else
                         ("scale_events", scale_events["before"], scale_events["after"]))
    return {"kind": kind, "before": run, "after": replay, "thin": max(run, replay) < THIN}


def caveat_text(evidence: Mapping[str, Any]) -> str | None:
    """The caveat in words for thin `evidence`, with the rule, or None where it is not thin."""
    if not evidence.get("thin"):
        return None
    run, replay = evidence["before"], evidence["after"]
    named = "scale event" if evidence["kind"] == "scale_events" else "avoidable cold load"
    return (f"thin evidence: skew-aware had {run} {named}{'' if run == 1 else 's'} in this run and {replay} in the "
            f"replay, fewer than {THIN}: one {named} is then more than the {MOVED:.0%} move this advice asks for, "
            f"and one burst landing otherwise could undo it; replay a longer trace before relying on it")
