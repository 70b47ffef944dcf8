"""The shipped alerts and dashboard at fleet size: 10,000 runtime pods read by two adapter replicas, where a few
exporters are always broken and pods are replaced every minute. An alert that fires then fires forever, and is
muted; a dashboard query that reads the whole namespace costs more with every runtime added.

Each case is a `promtool test rules` unit test over the shipped rules.yaml, written here with the series a
fleet of that size produces (counters as they rise per minute)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.manifests.support import GRAFANA, promtool_test_rules

SCRAPES_PER_MINUTE = 40_000
"""10,000 pods scraped every 15 s by one replica."""


def adapter_counters(errors_per_minute: int, reason: str, scrapes_per_minute: int = SCRAPES_PER_MINUTE
                     ) -> list[dict[str, str]]:
    series = []
    for replica in ("adapter-a", "adapter-b"):
        labels = f'job="modelmesh-autoscaler", namespace="modelmesh-autoscaler", pod="{replica}"'
        series += [
            {"series": f'modelmesh_autoscaler_source_reads_total{{{labels}, source="scrape"}}',
             "values": f"0+{scrapes_per_minute}x40"},
            {"series": f'modelmesh_autoscaler_source_errors_total{{{labels}, source="scrape", reason="{reason}"}}',
             "values": f"0+{errors_per_minute}x40"},
        ]
    return series


def promtool_test(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    return promtool_test_rules(tmp_path, tests, "fleet_test.yaml", timeout=60)


def test_a_few_broken_exporters_in_a_large_fleet_do_not_fire_the_source_errors_alert(tmp_path: Path) -> None:
    """Three broken exporters (each retried about once a minute) and a pod replaced every minute (its exporter
    refuses the connection while it stops): 4 failures a minute per replica, 0.01% of the scrapes. The pods
    are named by ModelMeshExporterDown; "the adapter cannot read its source" is not true."""
    done = promtool_test(tmp_path, [{
        "interval": "1m",
        "input_series": adapter_counters(errors_per_minute=4, reason="connect"),
        "alert_rule_test": [{"eval_time": "30m", "alertname": "ModelMeshAutoscalerSourceErrors", "exp_alerts": []}],
    }])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_fleet_the_adapter_cannot_read_fires_the_source_errors_alert(tmp_path: Path) -> None:
    """A NetworkPolicy that drops port 9187: every scrape tried fails (fewer are tried, backing off)."""
    done = promtool_test(tmp_path, [{
        "interval": "1m",
        "input_series": adapter_counters(errors_per_minute=10_000, reason="timeout", scrapes_per_minute=10_000),
        "alert_rule_test": [{"eval_time": "30m", "alertname": "ModelMeshAutoscalerSourceErrors", "exp_alerts": [
            {"exp_labels": {"severity": "info", "namespace": "modelmesh-autoscaler", "source": "scrape",
                            "reason": "timeout"},
             "exp_annotations": {
                 "summary": "modelmesh-autoscaler cannot read its scrape source (timeout)",
                 "description": "The adapter's reads from its metrics source fail steadily by reason timeout: 1.00 of "
                                "the exporter scrapes it tries (scrape source), or failures per second (Prometheus). A "
                                "few broken exporters in a large fleet do not count "
                                "(ModelMeshExporterDown names them); "
                                "this is a large share of the fleet, or the source itself. Affected pods keep their "
                                "last good values and count as missing."}}]}],
    }])
    assert done.returncode == 0, done.stdout + done.stderr


def api_requests(per_minute: dict[str, int]) -> list[dict[str, str]]:
    """One replica's external-metrics answers by code, as counters rising `per_minute`."""
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
    return [{"series": f'modelmesh_autoscaler_api_requests_total{{job="modelmesh-autoscaler", '
                       f'namespace="modelmesh-autoscaler", pod="adapter-a", path="{path}", code="{code}"}}',
             "values": f"0+{count}x40"} for code, count in per_minute.items()]


def test_single_pod_runtimes_replaced_every_minute_do_not_fire_the_503_alert(tmp_path: Path) -> None:
    """5,000 runtimes with 4 metrics each, asked every 15 s (80,000 answers a minute). Pods are replaced every
    minute somewhere in the fleet; a runtime of one pod answers 503 until its new pod is fresh, so a few runtimes
    always do (64 answers a minute, 0.08%). Those HPAs hold a refresh or two, as designed; an adapter-wide
    warning that never clears is not news. Every answer failing is."""
    done = promtool_test(tmp_path, [
        {"interval": "1m", "input_series": api_requests({"200": 80_000, "503": 64}),
         "alert_rule_test": [{"eval_time": "30m", "alertname": "ModelMeshAutoscalerServing503", "exp_alerts": []}]},
        {"interval": "1m", "input_series": api_requests({"200": 0, "503": 80_000}),
         "alert_rule_test": [{"eval_time": "30m", "alertname": "ModelMeshAutoscalerServing503", "exp_alerts": [
             {"exp_labels": {"severity": "warning", "namespace": "modelmesh-autoscaler",
                             "job": "modelmesh-autoscaler"},
              "exp_annotations": {
                  "summary": "modelmesh-autoscaler answers HPAs with 503",
                  "description": "For 15 minutes the adapter has answered 100% of the external metric requests "
                                 "with 503 (data too stale or too sparse, the source down, or a metric no pod "
                                 "reports): those HPAs hold their replicas. A few runtimes at a time (a single-pod "
                                 "runtime whose pod is being replaced) do not count, nor do the 503s of runtimes "
                                 "scaled to zero (nothing is wrong there); ModelMeshRuntimeValuesUnknown names every "
                                 "runtime unknown for 10 minutes, and a metric answered 503 while its runtime's "
                                 "others are served has no modelmesh_autoscaler_served_value series; the adapter's "
                                 "log and /debug say why."}}]}]},
    ])
    assert done.returncode == 0, done.stdout + done.stderr


PER_RUNTIME_OR_POD = re.compile(r"(modelmesh_autoscaler_(?:served_value|runtime_\w+|pod_deletion_cost))\{([^}]*)\}")


def test_dashboard_panels_read_only_the_chosen_runtimes_series() -> None:
    """The dashboard shows one runtime. A panel whose selector stops at the namespace loads every runtime's or
    every pod's series of it at each refresh of the panel (10,000 deletion costs over the time range, to keep
    two) and costs more the larger the fleet: each selects the runtime (`deployment`) or its pods by name."""
    dashboard = json.loads((GRAFANA / "modelmesh-autoscaler.json").read_text())
    selectors = [(panel["title"], match) for panel in dashboard["panels"] for target in panel.get("targets", [])
                 for match in PER_RUNTIME_OR_POD.findall(target["expr"])]
    assert selectors
    wide = [(title, name, labels) for title, (name, labels) in selectors
            if 'deployment="$deployment"' not in labels and 'pod=~"$deployment-' not in labels]
    assert not wide
