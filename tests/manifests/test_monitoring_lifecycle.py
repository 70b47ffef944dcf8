"""The shipped alerts through a fleet's ordinary life: nothing fires.

One hour of what Prometheus stores from a healthy fleet in which everything that happens every day happens:
a runtime scaled to zero (modelmesh-serving does it to every runtime no InferenceService uses), a single-pod
runtime whose pod is replaced, an adapter that starts fresh and is later restarted by a rolling update (its
counters start again from zero under a new pod name, the Lease moves), and an exporter that restarts (its
counters reset, ModelMesh not read yet at its first scrape). Each case is a `promtool test rules` unit test
over the shipped rules.yaml that expects no alert, at several times of that hour. `rules_test.yaml` holds each
alert firing where its description says it does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.manifests.support import alert_names, promtool_test_rules

NS = "modelmesh-serving"
API_PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
MINUTES = 60


def during(start: int, end: int, values: str) -> str:
    """promtool's series notation: nothing before minute `start`, `values` (covering start..end), then a
    staleness marker (the target is gone)."""
    tail = " stale" if end < MINUTES else ""
    return " ".join(part for part in ("_x" + str(start) if start else "", values) if part) + tail


def exporter(deployment: str, pod: str, start: int, end: int, *, restart_at: int | None = None) -> list[dict[str, str]]:
    """One runtime pod's exporter, scraped every minute from `start` to `end`: ModelMesh read 5 s before each
    scrape. At `restart_at` the exporter restarts: its first scrape after it comes before its first read of
    ModelMesh (no success timestamp yet, success 0, one `connect` error), its counters start from zero."""
    labels = f'job="modelmesh-exporter", namespace="{NS}", deployment="{deployment}", pod="{pod}"'
    n = end - start
    clock = f"{60 * start}+60x{n}"
    read = f"{60 * start - 5}+60x{n}"
    success, errors = f"1x{n}", f"0x{n}"
    if restart_at is not None:
        before, after = restart_at - start, end - restart_at
        read = f"{60 * start - 5}+60x{before - 1} _ {60 * (restart_at + 1) - 5}+60x{after - 1}"
        success = f"1x{before - 1} 0 1x{after - 1}"
        errors = f"0x{before - 1} 1x{after}"
    series = {
        "up": f"1x{n}",
        "modelmesh_exporter_time_seconds": clock,
        'modelmesh_exporter_collector_success{collector="modelmesh"}': success,
        'modelmesh_exporter_collector_success{collector="gpu"}': f"1x{n}",
        'modelmesh_exporter_last_success_timestamp_seconds{collector="modelmesh"}': read,
        'modelmesh_exporter_last_success_timestamp_seconds{collector="gpu"}': read,
        'modelmesh_exporter_scrape_errors_total{collector="modelmesh", reason="connect"}': errors,
        "modelmesh_pod_requests_per_second": f"40x{n}",
        "modelmesh_pod_gpu_busy_ratio": f"0.5x{n}",
    }
    out = []
    for name, values in series.items():
        base, _, extra = name.partition("{")
        selector = f"{base}{{{labels}{', ' + extra.rstrip('}') if extra else ''}}}"
        out.append({"series": selector, "values": during(start, end, values)})
    return out


def adapter(pod: str, start: int, end: int, runtimes: dict[str, tuple[int, int]]) -> list[dict[str, str]]:
    """One adapter replica from `start` to `end`: it takes the Lease and warms up within its first minute
    (values unknown, 503 to the HPA meanwhile), then serves `runtimes[name]` = (replicas, until): from minute
    `until` on the runtime is scaled to zero (no values and no `known` series, no misses). Its counters start
    from zero."""
    labels = f'job="modelmesh-autoscaler", namespace="modelmesh-autoscaler", pod="{pod}"'
    n = end - start
    path = API_PATH
    series = [
        (f"up{{{labels}}}", f"1x{n}"),
        (f"process_start_time_seconds{{{labels}}}", f"{1_700_000_000 + 60 * start}x{n}"),  # a new pod: no restart
        (f"modelmesh_autoscaler_values_age_seconds{{{labels}}}", f"3x{n}"),
        (f"modelmesh_autoscaler_leader{{{labels}}}", f"0 1x{n - 1}"),
        (f'modelmesh_autoscaler_api_requests_total{{{labels}, path="{path}", code="200"}}', f"0 0+320x{n - 1}"),
        (f'modelmesh_autoscaler_api_requests_total{{{labels}, path="{path}", code="503"}}', f"0 12x{n - 1}"),
        (f'modelmesh_autoscaler_source_reads_total{{{labels}, source="scrape"}}', f"0+240x{n}"),
        (f'modelmesh_autoscaler_deletion_cost_patches_total{{{labels}, result="ok"}}', f"0 1+2x{n - 1}"),
        (f'modelmesh_autoscaler_authorization_decisions_total{{{labels}, decision="allowed", cached="false"}}',
         f"0+4x{n}"),
    ]
    for le in ("5", "15", "30", "60", "+Inf"):
        series.append((f'modelmesh_autoscaler_metric_freshness_seconds_bucket{{{labels}, le="{le}"}}',
                       f"0 0+{0 if le == '5' else 320}x{n - 1}"))
    out = [{"series": name, "values": during(start, end, values)} for name, values in series]
    for deployment, (replicas, until) in runtimes.items():
        runtime = f'job="modelmesh-autoscaler", namespace="{NS}", deployment="{deployment}", pod="{pod}"'
        out.append({"series": f"modelmesh_autoscaler_runtime_consecutive_misses{{{runtime}}}",
                    "values": during(start, end, f"0x{n}")})
        last = min(end, until)
        if last > start:
            desired = f'modelmesh_autoscaler_served_value{{{runtime}, metric="modelmesh_desired_replicas"}}'
            out.append({"series": f"modelmesh_autoscaler_runtime_values_known{{{runtime}}}",
                        "values": during(start, last, f"0 1x{last - start - 1}")})
            out.append({"series": desired, "values": during(start, last, f"_ {replicas}x{last - start - 1}")})
    return out


def promtool_test(tmp_path: Path, input_series: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    quiet = [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []}
             for minute in (12, 25, 34, 42, 50, 59) for name in alert_names()]
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": input_series, "alert_rule_test": quiet}],
                               "lifecycle_test.yaml")


def test_an_ordinary_hour_of_a_fleet_fires_no_alert(tmp_path: Path) -> None:
    """- `busy` (2 pods): the exporter of busy-0 restarts at minute 40.
    - `solo` (1 pod): solo-0 is replaced by solo-1 at minute 30 (the new pod's exporter answers a minute later).
    - `idle` (1 pod): scaled to zero at minute 10; the adapter keeps it, with no values and no misses.
    - the adapter: adapter-a starts with the fleet, and is replaced by adapter-b at minute 20."""
    runtimes = {"busy": (2, MINUTES), "solo": (1, MINUTES), "idle": (1, 10)}
    series = [
        *exporter("busy", "busy-0", 0, MINUTES, restart_at=40),
        *exporter("busy", "busy-1", 0, MINUTES),
        *exporter("solo", "solo-0", 0, 30),
        *exporter("solo", "solo-1", 31, MINUTES),
        *exporter("idle", "idle-0", 0, 10),
        *adapter("adapter-a", 0, 20, runtimes),
        *adapter("adapter-b", 20, MINUTES, runtimes),
    ]
    done = promtool_test(tmp_path, series)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
