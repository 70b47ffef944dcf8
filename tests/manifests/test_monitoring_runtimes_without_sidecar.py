"""The shipped alerts in a cluster where only some runtimes carry the exporter sidecar.

The install guides add the sidecar per runtime, to the runtimes to be scaled (`triton` in the example). The
others modelmesh-serving runs (its built-in `mlserver-1.x` for the sklearn and xgboost models, say) have pods
too, and the adapter discovers every ModelMesh runtime Deployment: it scrapes port 9187 on their pods, finds
nothing, and publishes them with `modelmesh_autoscaler_runtime_values_known` 0 and misses counting up. No HPA
asks for them and nothing is wrong, but `ModelMeshRuntimeValuesUnknown` (warning) and
`ModelMeshRuntimeDataMissing` fired for each of them, for good.

Here a real adapter discovers both runtimes through the fake Kubernetes API (a real exporter over a fake ModelMesh
on `triton`'s pod, nothing on port 9187 of `mlserver`'s); its /metrics and what the shipped scrape config makes
of the two pods (the sidecar's port is a target, a pod without the sidecar declares no such port) become an hour
of series for a `promtool test rules` unit test over the shipped rules.yaml. Then `triton`'s exporter stops: its
values turn unknown, and the alert must fire for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.samples import Sample as ScrapedSample

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics, attach, pod_discovery_labels, relabel
from tests.manifests.support import EXAMPLES, container, find, kustomize, promtool_test_rules
from tests.manifests.test_monitoring import EXPORTER_JOB, scrape_jobs
from tests.support.processes import free_port, http_get, running, stop

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
SCALED = "modelmesh-serving-triton"  # the runtime the guide adds the sidecar to
OTHER = "modelmesh-serving-mlserver-1.x"  # a built-in runtime in use, without the sidecar
MINUTES = 60
OPERATOR, OPERATOR_TOKEN = "operator", "operator-token"
"""Who reads `/debug/runtimes`."""
MODELMESH_PORTS = [("grpc", 8033), ("http", 8008), ("prometheus", 2112)]
"""Ports a runtime pod declares without the sidecar (ModelMesh's, the REST proxy's)."""


@dataclass
class Cluster:
    adapter: str
    exporter: subprocess.Popen[bytes]
    pods: dict[str, str]  # deployment -> pod name
    exporter_port: int


def pod_name(deployment: str) -> str:
    return f"{deployment}-5d9c7b-0"


@contextlib.asynccontextmanager
async def cluster(workdir: Path) -> AsyncIterator[Cluster]:
    async with FakeKubeApi() as kube:
        ips = {SCALED: "127.0.0.6", OTHER: "127.0.0.7"}
        mm, exporter, adapter = free_port(), free_port(), free_port()
        declared = {SCALED: [*MODELMESH_PORTS, ("exporter-metrics", exporter)], OTHER: MODELMESH_PORTS}
        for deployment, ip in ips.items():
            selector = {"modelmesh-service": "modelmesh-serving", "name": deployment}
            kube.add_deployment(NS, deployment, replicas=1, labels=selector, selector=selector)
            kube.add_pod(NS, pod_name(deployment), labels={**selector, "pod-template-hash": "5d9c7b"}, ip=ip,
                         ports=declared[deployment])
        kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig", namespace="modelmesh-autoscaler")
        # /debug/runtimes is a resource request: read with a token allowed get on runtimes/debug, as the docs say
        kube.tokens[OPERATOR_TOKEN] = (OPERATOR, [])
        kube.allow(user=OPERATOR, verb="get", group="external.metrics.k8s.io", resource="runtimes", namespace=NS)
        runner = await serve(FakeModelMesh(ModelMeshLoad(requests_per_second=50)), ips[SCALED], mm)
        stack = contextlib.ExitStack()
        try:
            exporter_process = await asyncio.to_thread(stack.enter_context, running(
                ["exporter.cli", "--listen", f"{ips[SCALED]}:{exporter}", "--no-gpu", "--modelmesh-url",
                 f"http://{ips[SCALED]}:{mm}/metrics", "--modelmesh-interval", "0.5", "--load-window", "3"],
                f"http://{ips[SCALED]}:{exporter}/healthz", workdir / "exporter.log"))
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{adapter}", "--kubeconfig", str(kubeconfig),
                 "--authorization-always-allow-paths", "/healthz,/livez,/readyz,/metrics", "--exporter-port",
                 str(exporter), "--deletion-cost", "off", "--bridge", "off", "--refresh-interval", "1",
                 "--window", "3"],
                f"https://127.0.0.1:{adapter}/healthz", workdir / "adapter.log"))
            yield Cluster(f"127.0.0.1:{adapter}", exporter_process, {d: pod_name(d) for d in ips}, exporter)
        finally:
            await asyncio.to_thread(stack.close)
            await runner.cleanup()


def per_runtime_series(adapter: str) -> dict[str, dict[str, float]]:
    """deployment -> {series name: value} of the adapter's per-runtime gauges."""
    found: dict[str, dict[str, float]] = {}
    for sample in adapter_metrics(adapter):
        if sample.name in ("modelmesh_autoscaler_runtime_values_known",
                           "modelmesh_autoscaler_runtime_consecutive_misses"):
            found.setdefault(sample.labels["deployment"], {})[sample.name] = sample.value
    return found


async def settled(adapter: str, known: dict[str, float]) -> dict[str, dict[str, float]]:
    """The per-runtime series once `values_known` reads `known` and the misses have passed the alert's 8."""
    async with asyncio.timeout(60):
        while True:
            series = await asyncio.to_thread(per_runtime_series, adapter)
            if all(series.get(d, {}).get("modelmesh_autoscaler_runtime_values_known") == v for d, v in known.items()) \
                    and all(series[d]["modelmesh_autoscaler_runtime_consecutive_misses"] >= 8
                            for d, v in known.items() if v == 0):
                return series
            await asyncio.sleep(0.5)


def exporter_targets(pods: dict[str, str], exporter_up: float) -> list[dict[str, str]]:
    """What the shipped exporter job scrapes of the two pods: the sidecar's declared port on `triton`'s (`up` as
    given), ModelMesh's ports alone on the other's (none kept)."""
    job = scrape_jobs()[EXPORTER_JOB]
    (sidecar,) = container(find(kustomize(EXAMPLES), "ServingRuntime")["spec"], "autoscaler-exporter")["ports"]
    declared = {SCALED: [*MODELMESH_PORTS, (sidecar["name"], sidecar["containerPort"])], OTHER: MODELMESH_PORTS}
    series = []
    for deployment, ports in declared.items():
        labels = {"modelmesh-service": "modelmesh-serving", "name": deployment}
        for port_name, port in ports:
            target = relabel(job, pod_discovery_labels(NS, pods[deployment], labels, port_name, port, "10.0.0.1"))
            if target is not None:
                selector = ", ".join(f'{k}="{v}"' for k, v in target.items())
                series.append({"series": f"up{{{selector}}}", "values": f"{exporter_up:g}x{MINUTES}"})
    assert len(series) == 1, series
    return series


def an_hour(adapter_series: dict[str, dict[str, float]], exporter: list[dict[str, str]]) -> list[dict[str, str]]:
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    series = [{"series": f"up{{{target}}}", "values": f"1x{MINUTES}"}, *exporter]
    for deployment, values in adapter_series.items():
        # honor_labels: the runtime's namespace
        own = attach(ADAPTER_LABELS, {"namespace": NS, "deployment": deployment}, honor_labels=True)
        labels = ", ".join(f'{k}="{v}"' for k, v in own.items())
        for name, value in values.items():
            rising = name.endswith("consecutive_misses") and value > 0
            series.append({"series": f"{name}{{{labels}}}",
                           "values": f"{value:g}+{4 if rising else 0}x{MINUTES}"})  # misses: 4 refreshes a minute
    return series


def firing(tmp_path: Path, series: list[dict[str, str]], alerts: list[str]) -> subprocess.CompletedProcess[str]:
    """promtool's check that at minute 45 exactly `alerts` fire, each for `triton` (asked of ALERTS)."""
    expected = [{"labels": f'{{alertname="{alert}", deployment="{SCALED}"}}', "value": 1} for alert in alerts]
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": 'count by (alertname, deployment) (ALERTS{alertstate="firing"})', "eval_time": "45m",
         "exp_samples": expected}]}], "sidecar_test.yaml")


@dataclass
class Seen:
    """One run of `cluster`, as the tests below read it: first with `triton`'s sidecar answering, then stopped."""

    healthy: dict[str, dict[str, float]]
    """The per-runtime series, settled with the sidecar answering."""
    samples: list[ScrapedSample]
    """The adapter's /metrics, then."""
    debug: tuple[int, str]
    """The operator's GET of `mlserver`'s /debug/runtimes document, then."""
    adapter_log: str
    """The adapter's log, then."""
    pods: dict[str, str]
    exporter_port: int
    broken: dict[str, dict[str, float]]
    """The per-runtime series, settled once `triton`'s sidecar has stopped answering."""


async def watch(workdir: Path) -> Seen:
    async with cluster(workdir) as c:
        healthy = await settled(c.adapter, {SCALED: 1, OTHER: 0})
        samples = await asyncio.to_thread(adapter_metrics, c.adapter)
        debug = await asyncio.to_thread(http_get, f"https://{c.adapter}/debug/runtimes/{NS}/{OTHER}",
                                        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        adapter_log = (workdir / "adapter.log").read_text()
        await asyncio.to_thread(stop, c.exporter)  # triton's sidecar stops answering: a real outage
        broken = await settled(c.adapter, {SCALED: 0, OTHER: 0})
        return Seen(healthy, samples, debug, adapter_log, c.pods, c.exporter_port, broken)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Seen:
    """The two tests below each started this same cluster and waited the same ~10 s for `mlserver`'s misses to
    pass the alert's 8; the second only read what the first saw before stopping the sidecar. One run serves
    both, each reading what it read before, at the same moment of the run."""
    return asyncio.run(watch(tmp_path_factory.mktemp("sidecar-cluster")))


def test_runtimes_without_the_sidecar_fire_no_alert_and_a_broken_one_does(tmp_path: Path, seen: Seen) -> None:
    done = firing(tmp_path, an_hour(seen.healthy, exporter_targets(seen.pods, 1)), [])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    # triton's sidecar stopped answering (`watch`): a real outage
    done = firing(tmp_path, an_hour(seen.broken, exporter_targets(seen.pods, 0)),
                  ["ModelMeshExporterDown", "ModelMeshRuntimeDataMissing", "ModelMeshRuntimeValuesUnknown"])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_a_runtime_without_the_sidecar_is_not_a_failing_source(seen: Seen) -> None:
    """The pod without the sidecar declares ModelMesh's ports and not the exporter's: the adapter does not scrape
    it, so no `connect` error is counted for it at every backoff (which made `ModelMeshAutoscalerSourceErrors`
    fire for good: one such pod beside two with the sidecar is an 11% error share at the defaults, and the
    counter has no runtime label to leave it out by), and /debug says why that runtime has no data."""
    errors = {sample.labels["reason"]: sample.value for sample in seen.samples
              if sample.name == "modelmesh_autoscaler_source_errors_total" and sample.value}
    # None is the sidecar-less pod's. The one with the sidecar may have had its own, said as its own: on a machine
    # loaded 8 times over, two `garbage` answers were counted in a clean-clone CI run (an exporter's ModelMesh read
    # timing out, likely).
    assert f"scrape of {NS}/{OTHER}/" not in seen.adapter_log, seen.adapter_log[-3000:]
    scaled = f"scrape of {NS}/{SCALED}/{pod_name(SCALED)} failed"
    assert all(f"{scaled} ({reason})" in seen.adapter_log for reason in errors), (errors, seen.adapter_log[-3000:])
    status, text = seen.debug
    assert status == 200, text
    problems = json.loads(text)["source"]["problems"]
    assert [(p["reason"], p["pod"]) for p in problems] == [("no_exporter", pod_name(OTHER))], problems
    assert "sidecar" in problems[0]["detail"] and str(seen.exporter_port) in problems[0]["detail"], problems
    adapter_log = seen.adapter_log
    assert f"{NS}/{OTHER}: 1 Ready pod(s) run no exporter sidecar" in adapter_log, adapter_log[-3000:]
