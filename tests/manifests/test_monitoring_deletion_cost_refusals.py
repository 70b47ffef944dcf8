"""Pod PATCHes refused (a Role without `patch` on pods, an admission policy) leave every scale-down to remove pods by
the ReplicaSet's default order once its 60 s hold has run out: the busy pod may go at each one. The shipped
`ModelMeshDeletionCostPatchesFailing` said so at severity info after 30 minutes (s57 on-call, incident b): an hour
of scale-downs could go by before a page-worthy word. Here the refusals at the writer's pace (each pod tried again
at its 5-minute refresh: `failed` grows by the runtime's pods every 5 minutes) go through `promtool test rules` over
the shipped rules.yaml: a warning within 15 minutes, and none where every patch is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.api.app import build_api_app
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import refresher_with
from tests.manifests.support import PROMETHEUS, load_yaml, promtool_test_rules

LABELS = 'job="modelmesh-autoscaler", namespace="modelmesh-autoscaler", pod="a-0"'
PATCHES = "modelmesh_autoscaler_deletion_cost_patches_total"
ALERT = "ModelMeshDeletionCostPatchesFailing"


def _refused_every_5_minutes(minutes: int) -> list[dict[str, str]]:
    """4 pods refused at each 5-minute refresh from minute 1, beside the other namespaces' patches written."""
    failed = " ".join(str(4 * ((minute + 4) // 5)) for minute in range(minutes + 1))
    return [{"series": f'{PATCHES}{{{LABELS}, result="failed"}}', "values": failed},
            {"series": f'{PATCHES}{{{LABELS}, result="ok"}}', "values": f"0+9x{minutes}"}]


async def _failed_at_start(aiohttp_client: Any) -> str:
    """The failed count on a fresh adapter's /metrics as Prometheus's first scrape records it: `_` where there is
    no such series yet (promtool's "no sample")."""
    metrics = AdapterMetrics()
    client = await aiohttp_client(build_api_app(refresher_with(metrics=metrics), metrics))
    response = await client.get("/metrics")
    assert response.status == 200
    failed = [sample.value for family in text_string_to_metric_families(await response.text())
              for sample in family.samples if sample.name == PATCHES and sample.labels.get("result") == "failed"]
    return f"{failed[0]:g}" if failed else "_"


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


async def test_the_first_refusals_of_a_fresh_adapter_warn_10_minutes_later(aiohttp_client: Any,
                                                                           tmp_path: Path) -> None:
    """The series as the real adapter exports them: from its start (minute 0, the first scrape), 4 pods refused at
    minute 1 and again at each 5-minute retry. The alert says "refused for 10 minutes": it fires at minute 11.
    Published only at the first refusal (at 4), the series' first increase was the retry's at minute 6, and the
    warning came at minute 16; refusals of one pass alone (their pods deleted after) never warned."""
    refused = " ".join(str(4 * ((minute + 4) // 5)) for minute in range(1, 41))
    series = [{"series": f'{PATCHES}{{{LABELS}, result="failed"}}',
               "values": f"{await _failed_at_start(aiohttp_client)} {refused}"}]
    warning = [{"exp_labels": {"severity": "warning", "namespace": "modelmesh-autoscaler",
                               "job": "modelmesh-autoscaler"}, "exp_annotations": _annotations()}]
    tested = promtool_test_rules(tmp_path, [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [_alerts_at(10, []), _alerts_at(11, warning)]}],
        "deletion_cost_first_refusals_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_refusals_of_one_pass_that_the_retry_writes_do_not_warn(tmp_path: Path) -> None:
    """4 pods refused at minute 1 (a webhook restarting), written at their 5-minute retry: the refusal did not
    outlast a retry, and nobody has a Role to fix. Over a 15-minute window the one increase kept the rate above 0
    for 15 minutes, and the alert "refused for 10 minutes" fired at minute 11 for a fault gone at minute 6."""
    series = [{"series": f'{PATCHES}{{{LABELS}, result="failed"}}', "values": "0 4x40"},
              {"series": f'{PATCHES}{{{LABELS}, result="ok"}}', "values": "0+9x40"}]
    tested = promtool_test_rules(tmp_path, [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [_alerts_at(minute, []) for minute in (6, 11, 14, 20, 40)]}],
        "deletion_cost_one_pass_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
