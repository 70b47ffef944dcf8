"""A replica whose refresh hung, as the shipped dashboard and alerts see it.

A hung refresh (a deadlock, a stopped main process) leaves the replica's serving workers answering scrapes with
every series as the refresh last wrote them: `leader 1`, `runtime_values_known`, the served values, the deletion
costs. Only `modelmesh_autoscaler_values_age_seconds`, read at the scrape, grows past the replica's
`values_stall_limit_seconds`, from which on it answers 503, fails /readyz (the Service sends nothing to it) and
/livez. A reviewer stopped the leader so, beside a live replica: the dashboard showed 2 leaders on a panel that
says exactly one, the frozen deletion costs won `max by (pod)`, and the frozen series fed the alerts as well
(`max(leader)` 1 kept ModelMeshAutoscalerNoLeader quiet where no other replica could take the Lease).

Here two replicas are stored as Prometheus would from the real `AdapterMetrics` and `ValuesAge`: one whose refresh
hangs (its last values, chosen to mislead every `max` and `min` of the panels and alerts), one live. Each dashboard
panel and each alert must read the same as with the live replica alone; only the stall itself shows (the 'Age of
served values' panel, ModelMeshAutoscalerRefreshStalled).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from autoscaler.kube.watch_health import Watched
from autoscaler.names import ServedMetric
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from autoscaler.values_age import ValuesAge
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.manifests.series import pod_discovery_labels, relabel, samples_of
from tests.manifests.support import BASE, alerts_sent, container, find, kustomize
from tests.manifests.test_monitoring import RUNTIME_POD_LABELS, panels, scrape_jobs

NS = "modelmesh-serving"
TRITON = "modelmesh-serving-triton"
TORCHSERVE = "modelmesh-serving-torchserve"
PODS = {TRITON: [f"{TRITON}-0", f"{TRITON}-1"], TORCHSERVE: [f"{TORCHSERVE}-0", f"{TORCHSERVE}-1"]}
STALL_LIMIT_S = ServeSettings().stalled_after_s
SHOWN_ALONE = "Age of served values"
"""The panel that draws each replica's age against its limit: the one meant to show the hung replica."""


@dataclass(frozen=True)
class Refreshed:
    """What one replica's refresh writes, the same at every refresh here."""

    leading: bool
    known: dict[str, int]
    misses: dict[str, int]
    served: dict[str, float]  # modelmesh_desired_replicas by runtime, the other metrics derived from it
    costs: dict[str, int] = field(default_factory=dict)  # the leader's, by pod
    uncapped: dict[str, float] = field(default_factory=dict)
    not_ready: dict[str, str] = field(default_factory=dict)  # RuntimeScale -> reason
    status_stale: tuple[str, ...] = ()
    discovery_ok: bool = True


HUNG = Refreshed(
    leading=True, known={TRITON: 1, TORCHSERVE: 0}, misses={TRITON: 0, TORCHSERVE: 9}, served={TRITON: 3.0},
    costs={f"{TRITON}-0": 600, f"{TRITON}-1": 700, f"{TORCHSERVE}-0": 300, f"{TORCHSERVE}-1": 400},
    uncapped={TRITON: 5.0}, not_ready={"triton": "ServingRuntimeNotWritten"}, status_stale=("triton",),
    discovery_ok=False)
"""The last values of the replica whose refresh hangs: each above what the live replica says where a panel or an
alert takes the `max`, below it where they take the `min`."""


def live(leading: bool) -> Refreshed:
    """The live replica: it took the Lease, or could not (every attempt refused)."""
    costs = {f"{TRITON}-0": 600, f"{TRITON}-1": 700, f"{TORCHSERVE}-0": 800, f"{TORCHSERVE}-1": 50}
    return Refreshed(leading=leading, known={TRITON: 0, TORCHSERVE: 1}, misses={TRITON: 12, TORCHSERVE: 0},
                     served={TORCHSERVE: 1.5}, costs=costs if leading else {})


def write(metrics: AdapterMetrics, refreshed: Refreshed) -> None:
    """What a refresh (and the leader's writers) leave in the replica's self-metrics."""
    metrics.set_leader(refreshed.leading)
    metrics.runtime_known.update({(NS, d): v for d, v in refreshed.known.items()})
    metrics.consecutive_misses.update({(NS, d): v for d, v in refreshed.misses.items()})
    metrics.served_value.update({
        (NS, d, metric.value): value for d, desired in refreshed.served.items()
        for metric, value in ((ServedMetric.DESIRED_REPLICAS, desired), (ServedMetric.GPU_BUSY, desired / 4),
                              (ServedMetric.REQUEST_LOAD, 100 * desired), (ServedMetric.CACHE_PRESSURE, desired / 2))})
    metrics.uncapped_replicas.update({(NS, d): v for d, v in refreshed.uncapped.items()})
    metrics.pod_deletion_cost.update({(NS, pod): cost for pod, cost in refreshed.costs.items()})
    for scale, reason in refreshed.not_ready.items():
        metrics.set_runtime_scale_ready(NS, scale, False, reason)
    for scale in refreshed.status_stale:
        metrics.runtime_scale_status_seen(NS, scale, True)
    metrics.publish_discovery({"*": refreshed.discovery_ok})
    metrics.watch_established(Watched.HPAS, None, refreshed.discovery_ok)
    metrics.scale_down_holds.labels("queued").inc()
    metrics.deletion_cost_patched("ok")


def scrapes(replicas: dict[str, Refreshed], hang_at: int, steps: int, step_s: float,
            end: float) -> Iterator[tuple[int, Sample]]:
    """(step, sample) of `steps` scrapes `step_s` apart up to `end`: the runtime pods' exporter targets and the
    adapter replicas named in `replicas`; the refresh of "hung" stops after scrape `hang_at`."""
    jobs = scrape_jobs()
    deployment = find(kustomize(BASE), "Deployment")
    (https,) = container(deployment["spec"]["template"]["spec"], "adapter")["ports"]
    exporters: list[dict[str, str]] = []
    for runtime, pods in PODS.items():
        for index, pod in enumerate(pods):
            target = relabel(jobs["modelmesh-exporter"], pod_discovery_labels(
                NS, pod, {**RUNTIME_POD_LABELS, "name": runtime}, "exporter", 9187, f"10.0.{len(exporters)}.{index}"))
            assert target is not None
            exporters.append(target)
    start = end - step_s * (steps - 1)
    now = start
    refreshed_at: dict[str, float] = {}
    targets = {}
    for index, name in enumerate(("hung", "live")):
        target = relabel(jobs["modelmesh-autoscaler"], pod_discovery_labels(
            deployment["metadata"]["namespace"], f"modelmesh-autoscaler-{name}",
            deployment["spec"]["template"]["metadata"]["labels"], https["name"], https["containerPort"],
            f"10.0.9.{index + 1}"))
        assert target is not None
        metrics = AdapterMetrics(bridge=True)
        metrics.registry.register(ValuesAge(partial(refreshed_at.get, name), STALL_LIMIT_S, clock=lambda: now))
        if name in replicas:
            targets[name] = (metrics, target)
    for step in range(steps):
        now = start + step_s * step
        for target in exporters:
            yield step, Sample("up", target, 1.0, now)
        for name, (metrics, target) in targets.items():
            if name == "live" or step <= hang_at:
                write(metrics, replicas[name])
                refreshed_at[name] = now - 2.0
            for sample in samples_of(metrics.registry, target, True, now):
                yield step, sample


# ---- the dashboard, on a real Prometheus ----


def fill(expr: str, deployment: str) -> str:
    """A panel's expression with the dashboard's variables as Grafana sends them."""
    values = {"namespace": NS, "deployment": deployment, "__rate_interval": "1m"}
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], expr)


async def drawn(prometheus: PrometheusServer, deployment: str) -> dict[str, dict[frozenset[tuple[str, str]], str]]:
    """Every line each panel target draws for `deployment`, by its labels (the value to 9 digits, as a string: a
    sum's last bit may differ with a 0 added, and NaN, a histogram's quantile without observations, equals NaN)."""
    found = {}
    for panel in panels():
        if panel["title"] == SHOWN_ALONE:
            continue
        for target in panel["targets"]:
            result = await prometheus.query(fill(target["expr"], deployment))
            found[f"{panel['title']!r} {target['refId']}"] = {
                frozenset(series["metric"].items()): f"{float(series['value'][1]):.9g}" for series in result}
    return found


async def stored(tmp_path: Path, replicas: dict[str, Refreshed], end: float) -> PrometheusServer:
    """Five minutes of scrapes 15 s apart, the hung replica's refresh stopped after the sixth."""
    samples = [sample for _, sample in scrapes(replicas, hang_at=5, steps=20, step_s=15.0, end=end)]
    tsdb = create_blocks(openmetrics_text(samples), tmp_path / "tsdb")
    return PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path)


@pytest.mark.asyncio
@pytest.mark.parametrize("live_leads", [True, False], ids=["the other replica leads", "no other replica leads"])
async def test_the_panels_read_as_if_the_hung_replica_were_not_there(tmp_path: Path, live_leads: bool) -> None:
    end = time.time()
    both = await stored(tmp_path / "both", {"hung": HUNG, "live": live(live_leads)}, end)
    alone = await stored(tmp_path / "alone", {"live": live(live_leads)}, end)
    async with both, alone:
        differ: dict[str, tuple[object, object]] = {}
        for deployment in PODS:
            seen, expected = await drawn(both, deployment), await drawn(alone, deployment)
            differ |= {f"{deployment}: {where}": (seen[where], expected[where])
                       for where in seen if seen[where] != expected[where]}
        assert not differ, f"panels that show the hung replica's last values (with it, without it): {differ}"
        (age,) = [p for p in panels() if p["title"] == SHOWN_ALONE]
        shown = await both.query(fill(age["targets"][0]["expr"], TRITON))
        assert {s["metric"]["pod"] for s in shown} == {"modelmesh-autoscaler-hung", "modelmesh-autoscaler-live"}


# ---- the alerts, under promtool ----


def promtool_series(samples: Iterator[tuple[int, Sample]], steps: int) -> list[dict[str, str]]:
    """The samples as promtool's `input_series`, one value a step ("_" where a series has none)."""
    values: dict[str, list[str]] = {}
    for step, sample in samples:
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
        values.setdefault(f"{sample.name}{{{labels}}}", ["_"] * steps)[step] = repr(float(sample.value))
    return [{"series": series, "values": " ".join(row)} for series, row in values.items()]


def firing(tmp_path: Path, replicas: dict[str, Refreshed], minute: int) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """The alerts firing at `minute` of an hour scraped once a minute, the hung replica's refresh stopped after
    minute 5."""
    steps = 60
    series = promtool_series(scrapes(replicas, hang_at=5, steps=steps, step_s=60.0, end=60.0 * (steps - 1)), steps)
    return {(alert.labels["alertname"], frozenset(alert.labels.items()))
            for alert in alerts_sent(tmp_path, series, minute)}


@pytest.mark.parametrize("live_leads", [True, False], ids=["the other replica leads", "no other replica leads"])
def test_the_alerts_fire_as_if_the_hung_replica_were_not_there(tmp_path: Path, live_leads: bool) -> None:
    """At minute 30 every alert's `for` has run since the hang; the hung replica adds its own stall, nothing else."""
    (tmp_path / "both").mkdir()
    (tmp_path / "alone").mkdir()
    seen = firing(tmp_path / "both", {"hung": HUNG, "live": live(live_leads)}, 30)
    expected = firing(tmp_path / "alone", {"live": live(live_leads)}, 30)
    stalled = {alert for alert in seen if alert[0] == "ModelMeshAutoscalerRefreshStalled"}
    assert stalled, f"the hung replica's stall is not alerted on: {sorted(name for name, _ in seen)}"
    assert {name for name, _ in expected} >= {"ModelMeshRuntimeValuesUnknown", "ModelMeshRuntimeDataMissing"}
    extra, missing = sorted(seen - stalled - expected), sorted(expected - seen)
    assert seen - stalled == expected, f"alerts the hung replica's last values fire: {extra}; keep quiet: {missing}"
