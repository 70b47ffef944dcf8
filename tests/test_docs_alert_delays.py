"""Where the docs say after how long a shipped alert fires, they say what the shipped rule does.

operations.md said `ModelMeshAutoscalerRefreshStalled` fires "over 5 minutes" and "where no restart came within 5
minutes", but the rule fired on `modelmesh_autoscaler_values_age_seconds > 300` held `for: 2m`: values 7 minutes
old (now 240 s past the replica's own stall limit, 60 s at the defaults: the same 7 minutes). An on-call engineer
waiting out 5 minutes for the alert that tells a hung refresh from a slow one waited 2 more. design.md said
`ModelMeshExporterStale` had fired by the fifth minute of an outage; its age over 120 s held for 5 minutes is 7.

Every alert the docs give a figure for is read from rules.yaml by one of three readings (the table below): the
rule's `for:` (a condition true from its start, held that long), an age's threshold (or the replica's stall limit
at the defaults plus the rule's margin) plus its `for:` (an age grows from 0 at the last good value), or the
window of its range (no `for:`: it fires at once and holds while the window still counts the event). A figure
"every N minutes" is a rate's window, not a delay, and is not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autoscaler.cli import build_parser
from autoscaler.serve_args import settings_from_args
from tests.manifests.support import PROMETHEUS, load_yaml

REPO = Path(__file__).resolve().parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
RULES: dict[str, dict[str, Any]] = {rule["alert"]: rule for group in load_yaml(PROMETHEUS / "rules.yaml")["groups"]
                                    for rule in group["rules"] if "alert" in rule}


def held_for(rule: dict[str, Any]) -> float:
    """A condition true from its start: the rule's `for:` in minutes."""
    held = re.fullmatch(r"(\d+)m", rule["for"])
    assert held is not None, rule  # a new shape: teach this test to read it
    return int(held[1])


def age_over_threshold_then_held(rule: dict[str, Any]) -> float:
    """An age in seconds that grows from 0: past its threshold, then held for the rule's `for:`."""
    threshold = re.search(r"> (\d+)$", rule["expr"].strip())
    assert threshold is not None, rule
    return int(threshold[1]) / 60 + held_for(rule)


def age_over_stall_limit_then_held(rule: dict[str, Any]) -> float:
    """An age in seconds that grows from 0: past the replica's own stall limit plus the rule's margin, then held for
    the rule's `for:`; the figure the docs give is the one at the adapter's defaults (the limit it publishes then)."""
    margin = re.search(r"values_stall_limit_seconds\{[^}]*\} \+ (\d+)\)", rule["expr"])
    assert margin is not None, rule
    defaults = settings_from_args(build_parser().parse_args(["serve"]), {})
    return (defaults.stalled_after_s + int(margin[1])) / 60 + held_for(rule)


def range_window(rule: dict[str, Any]) -> float:
    """No `for:`: the rule fires at the event and stays while its one range (`[30m]`) still holds it."""
    assert "for" not in rule, rule
    [window] = set(re.findall(r"\[(\d+)m\]", rule["expr"]))
    return int(window)


DELAYS: dict[str, Callable[[dict[str, Any]], float]] = {
    "ModelMeshExporterDown": held_for,
    "ModelMeshCollectorFailing": held_for,
    "ModelMeshExporterStale": age_over_threshold_then_held,
    "ModelMeshAutoscalerTargetDown": held_for,
    "ModelMeshAutoscalerDown": held_for,
    "ModelMeshAutoscalerRestarting": range_window,  # "the third start in 30 minutes"
    "ModelMeshAutoscalerRefreshStalled": age_over_stall_limit_then_held,
    "ModelMeshAutoscalerServing503": held_for,  # a share over 5%: true from an outage's first 503s
    "ModelMeshRuntimeValuesUnknown": held_for,
    "ModelMeshAutoscalerDiscoveryFailing": held_for,
    "ModelMeshAutoscalerWatchFailing": held_for,
    "ModelMeshAutoscalerNoLeader": held_for,
    "ModelMeshAutoscalerNoLeaderDeletionCosts": held_for,
    "ModelMeshDeletionCostPatchesFailing": held_for,  # a rate over 0: true from the first refusal counted
    "ModelMeshScaleDownWithStaleDeletionCosts": range_window,  # "fires for 15 minutes after each"
    "ModelMeshRuntimeScaleWritesFailing": held_for,
    "ModelMeshRuntimeScalesNotListed": held_for,
    "ModelMeshRuntimeReplicasFought": held_for,
    "ModelMeshRuntimeScaleStatusStale": held_for,
    "ModelMeshRuntimeScalesStatusStaleInNamespace": held_for,
    "ModelMeshRuntimeScaleNotReady": held_for,
    "ModelMeshRuntimeScaleUpBlocked": held_for,
    "ModelMeshRuntimeCappedAtMaxReplicas": held_for,
    "ModelMeshRuntimeAtMaxReplicas": held_for,
}
"""How each alert's figure follows from its rule."""

MENTION = re.compile(r"`(" + "|".join(sorted(RULES, key=len, reverse=True)) + r")`")
MINUTES = re.compile(r"(?<!every )\b(\d+) minutes")
CLAUSE_END = re.compile(r"[.;:,|] |[(|]")


def figures_said() -> Iterator[tuple[str, float, str]]:
    """(alert, minutes, where) for each mention followed, before the next alert or the sentence's end, by "N
    minutes" (`X` fires after 10 minutes), or preceded by one in its clause (after 10 minutes `X` names ...)."""
    for path in DOCS:
        text = " ".join(path.read_text().split())
        mentions = list(MENTION.finditer(text))
        for index, mention in enumerate(mentions):
            stop = mentions[index + 1].start() if index + 1 < len(mentions) else len(text)
            after = re.split(r"\. |\|", text[mention.end():stop], maxsplit=1)[0]
            start = mentions[index - 1].end() if index else 0
            before = CLAUSE_END.split(text[start:mention.start()])[-1]
            said = MINUTES.search(after) or MINUTES.search(before)
            if said is not None:
                yield mention[1], float(said[1]), f"{path.name}: ...{before}`{mention[1]}`{after[:80]}..."


def test_every_delay_the_docs_give_an_alert_is_its_rules() -> None:
    said = list(figures_said())
    assert len(said) >= 30, said  # the metrics table, the alerts list, the runbooks: the reading still finds them
    assert {alert for alert, _, _ in said} <= set(DELAYS), "an alert the table does not read: add it"
    wrong = [f"{where} says {minutes:g}, the rule {DELAYS[alert](RULES[alert]):g}"
             for alert, minutes, where in said if minutes != DELAYS[alert](RULES[alert])]
    assert not wrong, "\n".join(wrong)


def test_the_stalled_refresh_alert_fires_on_values_7_minutes_old() -> None:
    """The table's reading checked by hand once: at the defaults the stall limit is 60 s (three 15 s refresh
    intervals of staleness, plus one), 240 s past it is 5 minutes, held for 2 more."""
    assert age_over_stall_limit_then_held(RULES["ModelMeshAutoscalerRefreshStalled"]) == 7
