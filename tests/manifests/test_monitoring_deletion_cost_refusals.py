"""Pod PATCHes refused (a Role without `patch` on pods, an admission policy) leave every scale-down to remove pods by
the ReplicaSet's default order once its 60 s hold has run out: the busy pod may go at each one. The shipped
`ModelMeshDeletionCostPatchesFailing` said so at severity info after 30 minutes (s57 on-call, incident b): an hour
of scale-downs could go by before a page-worthy word. Here the refusals at the writer's pace (each pod tried again
at its 5-minute refresh: `failed` grows by the runtime's pods every 5 minutes) go through `promtool test rules` over
the shipped rules.yaml: a warning within 15 minutes, and none where every patch is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.manifests.support import PROMETHEUS, load_yaml, promtool_test_rules

LABELS = 'job="modelmesh-autoscaler", namespace="modelmesh-autoscaler", pod="a-0"'
PATCHES = "modelmesh_autoscaler_deletion_cost_patches_total"
ALERT = "ModelMeshDeletionCostPatchesFailing"


def _refused_every_5_minutes(minutes: int) -> list[dict[str, str]]:
    """4 pods refused at each 5-minute refresh from minute 1, beside the other namespaces' patches written."""
    failed = " ".join(str(4 * ((minute + 4) // 5)) for minute in range(minutes + 1))
    return [{"series": f'{PATCHES}{{{LABELS}, result="failed"}}', "values": failed},
            {"series": f'{PATCHES}{{{LABELS}, result="ok"}}', "values": f"0+9x{minutes}"}]


def _annotations() -> dict[str, str]:
    """The alert's annotations as rules.yaml writes them: promtool compares them too."""
    rules = [rule for group in load_yaml(PROMETHEUS / "rules.yaml")["groups"] for rule in group["rules"]]
    found: dict[str, str] = next(rule["annotations"] for rule in rules if rule.get("alert") == ALERT)
    return found


def _alerts_at(minute: int, firing: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": f"{minute}m", "alertname": ALERT, "exp_alerts": firing}


def test_refused_deletion_cost_patches_warn_within_15_minutes(tmp_path: Path) -> None:
    warning = [{"exp_labels": {"severity": "warning", "namespace": "modelmesh-autoscaler",
                               "job": "modelmesh-autoscaler"}, "exp_annotations": _annotations()}]
    series = _refused_every_5_minutes(40)
    tested = promtool_test_rules(tmp_path, [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [_alerts_at(5, []), _alerts_at(15, warning), _alerts_at(40, warning)]}],
        "deletion_cost_refusals_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_written_deletion_cost_patches_fire_nothing(tmp_path: Path) -> None:
    series = [{"series": f'{PATCHES}{{{LABELS}, result="failed"}}', "values": "0x40"},
              {"series": f'{PATCHES}{{{LABELS}, result="ok"}}', "values": "0+9x40"}]
    tested = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series,
                                             "alert_rule_test": [_alerts_at(40, [])]}],
                                 "deletion_cost_written_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
