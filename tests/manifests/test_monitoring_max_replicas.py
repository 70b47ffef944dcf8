"""A runtime whose load calls for more replicas than its HPA's maxReplicas, as the operator sees it: /metrics
and the shipped alerts.

The adapter serves `modelmesh_desired_replicas` at the runtime's max_replicas (the HPA's maxReplicas where the
policy sets none: docs/design.md, Bounds), so that the HPA is never asked for more than it may give. So the HPA
says `DesiredWithinRange`, never `TooManyReplicas`, and `ModelMeshRuntimeScaleUpBlocked` (the served value
against the pods that run) cannot fire: with maxReplicas 2 and load worth 7, the runtime ran 2 pods, /metrics
served 2, and no alert said anything. Only /debug (`"winner": "max_replicas"`, `proposals.requests: 7`) and
kube-state-metrics' ModelMeshRuntimeAtMaxReplicas, where installed, told it.

Here a real refresher decides one runtime of two pods whose requests call for 7 under an HPA capped at 2; its
/metrics, held for 40 minutes beside the exporters' `up`, goes through `promtool test rules` over the shipped
rules.yaml.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from tests.api.builders import KEY, NOW
from tests.manifests.series import ADAPTER_LABELS, attach
from tests.manifests.support import promtool_test_rules

PODS = 2
RPS_TARGET = 10.0
UNCAPPED = "modelmesh_autoscaler_runtime_uncapped_replicas"


class TwoBusyPods(SourceDefaults):
    """One runtime of two fresh pods, each serving `rps` requests a second."""

    name = "static"
    errors: dict[str, int] = {}

    def __init__(self, rps: float) -> None:
        self.rps = rps

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(name=f"{KEY.deployment}-{i}", sampled_at=now - 1, requests_per_second=self.rps,
                               queue_delay_s=0.0, lru_age_s=900.0, cache_used_ratio=0.5, models_loaded=1.0)
                     for i in range(PODS))
        return [RuntimeSnapshot(KEY, pods, now, replicas=PODS)]

    async def close(self) -> None:
        return None


async def adapter_metrics_under(hpa: tuple[int, int], rps: float) -> dict[tuple[str, tuple[tuple[str, str], ...]],
                                                                          float]:
    """The per-runtime samples of the adapter's /metrics after two refreshes of the runtime under `hpa`."""
    metrics = AdapterMetrics()
    refresher = Refresher(TwoBusyPods(rps), PolicyBook(defaults=RuntimePolicy(target_rps_per_pod=RPS_TARGET)),
                          metrics, clock=lambda: NOW)
    refresher.hpa_bounds = lambda key: hpa
    for _ in range(2):
        await refresher.refresh_once()
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.labels.get("deployment") == KEY.deployment}


def forty_minutes_of(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[dict[str, str]]:
    """The adapter's per-runtime series as the shipped job stores them, and each runtime pod's exporter up."""
    series = []
    for (name, labels), value in samples.items():
        stored = attach(ADAPTER_LABELS, dict(labels), honor_labels=True)
        selector = ", ".join(f'{k}="{v}"' for k, v in stored.items())
        series.append({"series": f"{name}{{{selector}}}", "values": f"{value:g}x40"})
    for i in range(PODS):
        series.append({"series": f'up{{job="modelmesh-exporter", namespace="{KEY.namespace}", '
                                 f'deployment="{KEY.deployment}", pod="{KEY.deployment}-{i}"}}', "values": "1x40"})
    return series


def firing_for_the_runtime(tmp_path: Path, series: list[dict[str, str]], count: int) -> str:
    """promtool's complaint (empty: none) when `count` alerts on the runtime are not firing at minutes 20 and 39."""
    selector = f'alertstate="firing", namespace="{KEY.namespace}", deployment="{KEY.deployment}"'
    expected = [{"labels": "{}", "value": count}] if count else []
    done = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": f"count(ALERTS{{{selector}}})", "eval_time": f"{minute}m", "exp_samples": expected}
        for minute in (20, 39)]}], "max_replicas_test.yaml")
    return "" if done.returncode == 0 else (done.stdout + done.stderr)[-3000:]


async def test_a_runtime_held_at_its_hpas_max_replicas_says_what_it_would_want_and_fires_an_alert(
        tmp_path: Path) -> None:
    samples = await adapter_metrics_under((1, 2), rps=35.0)  # 70 requests/s at 10 a pod: 7 pods
    served = samples[("modelmesh_autoscaler_served_value", (("deployment", KEY.deployment), (
        "metric", "modelmesh_desired_replicas"), ("namespace", KEY.namespace)))]
    assert served == 2  # the cap, as before: the HPA is never asked for more than it may give
    uncapped = samples.get((UNCAPPED, (("deployment", KEY.deployment), ("namespace", KEY.namespace))))
    assert uncapped == 7, f"/metrics does not say the 7 replicas the load calls for: {sorted(samples)}"
    assert not firing_for_the_runtime(tmp_path, forty_minutes_of(samples), 1)


async def test_a_runtime_within_its_max_replicas_has_no_uncapped_series_and_fires_nothing(tmp_path: Path) -> None:
    samples = await adapter_metrics_under((1, 2), rps=8.0)  # 16 requests/s: 2 pods, within the cap
    assert not [name for name, _ in samples if name == UNCAPPED]
    assert not firing_for_the_runtime(tmp_path, forty_minutes_of(samples), 0)
