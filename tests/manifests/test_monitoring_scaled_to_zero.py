"""The shipped alerts on an adapter that serves a runtime scaled to zero, as a real adapter counts its answers.

modelmesh-serving scales every runtime that no InferenceService uses to zero (its `scaleToZero`, on by default).
The RuntimeScale keeps the replicas the HPA last set, so the HPA keeps asking for its metric every 15 s, and the
adapter answers each request with a 503 "scaled to zero": nothing is wrong, and the README and operations.md
promise that no alert fires. But the adapter counts those answers in
`modelmesh_autoscaler_api_requests_total{code="503"}` like any other, so `ModelMeshAutoscalerServing503`, which
judged the share of 503s alone, fired for good wherever more than one HPA'd runtime in twenty was idle.

Here a real adapter (`--targets`: one runtime `triton` with a real exporter over a fake ModelMesh, one runtime
`idle` with no pods, i.e. scaled to zero, and one in use without the sidecar, whose values are unknown with nothing
wrong, test_monitoring_runtimes_without_sidecar.py) is asked by two "HPAs" in turn; its own /metrics says how it counted
their answers. That count, at the HPA's pace (each HPA once every 15 s), becomes an hour of series for a
`promtool test rules` unit test over the shipped rules.yaml. Then the exporter stops: `triton`'s values turn
unknown (a real outage), and the same alert must fire.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.manifests.series import ADAPTER_LABELS, adapter_metrics, attach
from tests.manifests.support import alert_names, promtool_test_rules
from tests.support.processes import Server, all_running, free_port, http_get, poll, running, stop

NAMESPACE = "modelmesh-serving"
BUSY = "modelmesh-serving-triton"
IDLE = "modelmesh-serving-idle"
PLAIN = "modelmesh-serving-mlserver-1.x"
"""A runtime in use without the exporter sidecar (nobody scales it): its values are unknown, nothing is wrong."""
EXTERNAL_METRICS = "/apis/external.metrics.k8s.io/v1beta1"
ASKS_PER_MINUTE = 4
"""An HPA asks for each of its metrics once per sync period, 15 s by default."""
MINUTES = 60


@dataclass
class Fleet:
    adapter: str
    exporter: subprocess.Popen[bytes]  # stopping it is the outage
    workdir: Path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    workdir = tmp_path_factory.mktemp("scaled-to-zero")
    mm, exporter, adapter, nothing = free_port(), free_port(), free_port(), free_port()
    targets = workdir / "targets.yaml"
    targets.write_text(yaml.safe_dump({"runtimes": [
        {"namespace": NAMESPACE, "deployment": BUSY,
         "pods": [{"name": f"{BUSY}-5d9c7b-0", "url": f"http://127.0.0.1:{exporter}/metrics"}]},
        {"namespace": NAMESPACE, "deployment": IDLE, "pods": []},  # its Deployment asks for 0 replicas
        {"namespace": NAMESPACE, "deployment": PLAIN,
         "pods": [{"name": f"{PLAIN}-7f8d9c-0", "url": f"http://127.0.0.1:{nothing}/metrics"}]},
    ]}))
    with ExitStack() as stack:
        stack.enter_context(running(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm}", "--http",
                                     "--rps", "40"], f"http://127.0.0.1:{mm}/metrics", workdir / "modelmesh.log"))
        (exporter_process,) = stack.enter_context(all_running([Server(
            ["exporter.cli", "--listen", f"127.0.0.1:{exporter}", "--no-gpu", "--modelmesh-url",
             f"http://127.0.0.1:{mm}/metrics", "--modelmesh-interval", "0.5", "--load-window", "3"],
            f"http://127.0.0.1:{exporter}/metrics", workdir / "exporter.log")]))
        stack.enter_context(running(
            ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter}", "--targets",
             str(targets), "--deletion-cost", "off", "--refresh-interval", "1", "--window", "3"],
            f"https://127.0.0.1:{adapter}/healthz", workdir / "adapter.log"))
        yield Fleet(f"127.0.0.1:{adapter}", exporter_process, workdir)


def ask(fleet: Fleet, deployment: str, metric: str = "modelmesh_desired_replicas") -> tuple[int, str]:
    """What an HPA on `deployment`'s `metric` gets: (status, body)."""
    return http_get(f"https://{fleet.adapter}{EXTERNAL_METRICS}/namespaces/{NAMESPACE}/{metric}"
                    f"?labelSelector=deployment%3D{deployment}")


SCALED_TO_ZERO_ANSWERS = "modelmesh_autoscaler_api_scaled_to_zero_answers_total"


def requests_counted(fleet: Fleet) -> Counter[tuple[str, str]]:
    """The adapter's count of external-metrics answers, by route and status (its own /metrics scrapes left out),
    and of the 503s it answered for a runtime scaled to zero (under the key ("", SCALED_TO_ZERO_ANSWERS))."""
    return Counter({(s.labels.get("path", ""), s.labels.get("code", s.name)): s.value
                    for s in adapter_metrics(fleet.adapter)
                    if (s.name == "modelmesh_autoscaler_api_requests_total" and s.labels["path"] != "/metrics")
                    or s.name == SCALED_TO_ZERO_ANSWERS})


def an_hour_of(fleet: Fleet, exporter_up: int, rounds: int = 5,
               hpas: tuple[tuple[str, str], ...] = ((BUSY, "modelmesh_desired_replicas"),
                                                     (IDLE, "modelmesh_desired_replicas"))) -> list[dict[str, str]]:
    """`rounds` rounds of one request by each HPA (runtime, metric), as the adapter counts them, repeated at the
    HPA's pace for an hour; the adapter's per-runtime gauges as it publishes them now, held for the hour; and
    `triton`'s exporter as the shipped exporter job scrapes it (`up` as given; the runtime without the sidecar has
    no target)."""
    before = requests_counted(fleet)
    for _ in range(rounds):
        for deployment, metric in hpas:
            ask(fleet, deployment, metric)
    per_round = requests_counted(fleet) - before
    answered = sum(count for (path, _), count in per_round.items() if path)
    assert answered == len(hpas) * rounds, per_round
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    exporter = (f'up{{job="modelmesh-exporter", namespace="{NAMESPACE}", pod="{BUSY}-5d9c7b-0", '
                f'deployment="{BUSY}", instance="10.0.0.1:9187"}}')
    series = [{"series": f"up{{{target}}}", "values": f"1x{MINUTES}"},
              {"series": exporter, "values": f"{exporter_up}x{MINUTES}"}]
    for (path, code), count in per_round.items():
        step = count / rounds * ASKS_PER_MINUTE
        name = (f'modelmesh_autoscaler_api_requests_total{{{target}, path="{path}", code="{code}"}}' if path else
                f"{SCALED_TO_ZERO_ANSWERS}{{{target}}}")
        series.append({"series": name, "values": f"0+{step:g}x{MINUTES}"})
    for sample in adapter_metrics(fleet.adapter):
        if sample.name.startswith(("modelmesh_autoscaler_runtime_", "modelmesh_autoscaler_served_value")):
            labelled = attach(ADAPTER_LABELS, sample.labels, honor_labels=True)  # the runtime's own namespace stays
            selector = ", ".join(f'{k}="{v}"' for k, v in labelled.items())
            series.append({"series": f"{sample.name}{{{selector}}}", "values": f"{sample.value:g}x{MINUTES}"})
    return series


def alerts_at(tmp_path: Path, series: list[dict[str, str]], alert: str, firing: int,
              ) -> subprocess.CompletedProcess[str]:
    """promtool's verdict on `alert` at minutes 30 and 59 of the hour: `firing` alerts of that name expected
    (counted, so that the test does not restate the annotations' wording)."""
    check: dict[str, object] = (
        {"alert_rule_test": [{"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": []}
                             for minute in (30, 59)]} if not firing else
        {"promql_expr_test": [{"expr": f'count(ALERTS{{alertname="{alert}", alertstate="firing"}})',
                               "eval_time": f"{minute}m", "exp_samples": [{"labels": "{}", "value": firing}]}
                              for minute in (30, 59)]})
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, **check}],
                               "scaled_to_zero_test.yaml")


@pytest.mark.slow
def test_an_hpa_on_a_runtime_scaled_to_zero_fires_no_alert(fleet: Fleet, tmp_path: Path) -> None:
    poll(lambda: ask(fleet, BUSY)[0] == 200, timeout=30)
    status, body = ask(fleet, IDLE)
    assert status == 503 and "scaled to zero" in json.loads(body)["message"], body
    poll(lambda: any(s.labels.get("deployment") == PLAIN and s.value == 0 for s in adapter_metrics(fleet.adapter)
                     if s.name == "modelmesh_autoscaler_runtime_values_known"), timeout=30)
    series = an_hour_of(fleet, exporter_up=1)
    loud = []
    for alert in alert_names():
        done = alerts_at(tmp_path, series, alert, 0)
        if done.returncode != 0:
            loud.append(f"{alert}:\n{(done.stdout + done.stderr)[-1500:]}")
    assert not loud, "\n".join(loud)


@pytest.mark.slow
def test_an_hpa_on_a_metric_no_pod_reports_fires_the_503_alert(fleet: Fleet, tmp_path: Path) -> None:
    """`triton`'s exporter runs without its GPU collector, so no pod reports GPU busy: an HPA on
    `modelmesh_gpu_busy` gets a 503 at every sync and holds for good, while the runtime's other values are served
    (values_known 1). The alert left every 503 out while no runtime's values were unknown (that was how it told
    a runtime scaled to zero apart), and stayed silent with half the answers 503."""
    poll(lambda: ask(fleet, BUSY)[0] == 200, timeout=30)
    status, body = ask(fleet, BUSY, "modelmesh_gpu_busy")
    assert status == 503 and "the runtime has no GPU signal" in json.loads(body)["message"], body
    series = an_hour_of(fleet, exporter_up=1, hpas=((BUSY, "modelmesh_desired_replicas"),
                                                    (BUSY, "modelmesh_gpu_busy"), (IDLE, "modelmesh_desired_replicas")))
    done = alerts_at(tmp_path, series, "ModelMeshAutoscalerServing503", 1)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


@pytest.mark.slow
def test_a_runtime_whose_values_are_unknown_fires_the_503_alert(fleet: Fleet, tmp_path: Path) -> None:
    """The other side: the exporter of `triton` stops (scrapes fail, its data turns stale), so its HPA gets
    503s too, and its values are unknown: HPAs hold for a reason someone must fix."""
    poll(lambda: ask(fleet, BUSY)[0] == 200, timeout=30)
    stop(fleet.exporter)
    poll(lambda: ask(fleet, BUSY)[0] == 503, timeout=30)
    series = an_hour_of(fleet, exporter_up=0)
    done = alerts_at(tmp_path, series, "ModelMeshAutoscalerServing503", 1)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

