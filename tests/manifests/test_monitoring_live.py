"""The shipped scrape config, rules and dashboard on a real Prometheus scraping real processes.

`test_monitoring.py` runs every query on series written from the exporter's and the adapter's registries
through a Python copy of Prometheus's relabelling. Here nothing is copied: real exporters (`exporter.cli
--no-gpu`, reading fake ModelMesh containers) and a real adapter (`autoscaler.cli serve`, serving its
/metrics over https) are scraped by a real Prometheus running the shipped `scrape-config.yaml` (its relabel
rules, honor_labels, scheme, TLS and authorization settings as they are) and evaluating the shipped
`rules.yaml`. Only the Kubernetes discovery is replaced (Debian's Prometheus has none): each target is a static
one carrying the `__meta_kubernetes_*` labels pod discovery would give it, and scrapes come every second
instead of 15. The adapter authenticates and authorizes as in a cluster (its default open paths, the fake
Kubernetes API's TokenReviews and SubjectAccessReviews): Prometheus scrapes its /metrics with a ServiceAccount
token from the file the shipped job names, granted what the shipped ClusterRole grants, as a user would.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import trustme
import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter import names
from tests.fakes.prometheus import PrometheusServer
from tests.manifests.series import pod_discovery_labels
from tests.manifests.support import (
    BASE,
    EXAMPLES,
    PROMETHEUS,
    SERVICE_ACCOUNT_TOKEN,
    commented_yaml,
    container,
    find,
    kustomize,
    load_yaml,
    metric_names,
    with_token_file,
)
from tests.manifests.test_monitoring import (
    DCGM,
    KUBE_STATE_METRICS,
    RUNTIME_DEPLOYMENT,
    RUNTIME_NAMESPACE,
    RUNTIME_POD_LABELS,
    dashboard_queries,
    every_expression,
    family_sample_names,
    panels,
    rules,
    variable_queries,
)
from tests.support.processes import Server, all_running, free_port, http_get, poll, running

PODS = 2
EXTERNAL_METRICS = "/apis/external.metrics.k8s.io/v1beta1"
EMPTY_HERE = {
    "GPU busy": "the exporters run with --no-gpu",
    "GPU busy: served vs plain mean": "no GPU busy, so none served either",
    "Pod deletion cost": "no Kubernetes API here: nothing is written",
    "Leader and deletion-cost patches": "no Kubernetes API here: no patches (B)",
    "Adapter source errors": "a healthy fleet: the labelled error counters have no series before a first error",
    "Exporter errors": "likewise",
}
"""Panels (or one of their queries) that find nothing in this setup, and why."""
PROMETHEUS_USER = "system:serviceaccount:monitoring:prometheus"
PROMETHEUS_TOKEN = "prometheus-service-account-token"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HPA_TOKEN = "hpa-service-account-token"


class ShippedConfigPrometheus(PrometheusServer):
    """A `PrometheusServer` whose configuration is given whole (the shipped one, discovery replaced)."""

    def __init__(self, config: dict[str, Any], workdir: Path) -> None:
        super().__init__(workdir=workdir)
        self._shipped = config

    def _config(self) -> dict[str, Any]:
        return self._shipped


def shipped_config(exporters: list[tuple[str, str]], adapter: str, token_file: Path) -> dict[str, Any]:
    """scrape-config.yaml with each job's Kubernetes discovery replaced by static targets that carry the
    labels pod discovery would give them; `exporters` are (pod name, host:port). The ServiceAccount token the
    adapter's job reads in a pod is read from `token_file` here."""
    config: dict[str, Any] = load_yaml(PROMETHEUS / "scrape-config.yaml")
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    (sidecar_port,) = container(runtime["spec"], "autoscaler-exporter")["ports"]
    deployment = find(kustomize(BASE), "Deployment")
    pod = deployment["spec"]["template"]
    (https,) = container(pod["spec"], "adapter")["ports"]

    def static(namespace: str, name: str, labels: dict[str, str], port: dict[str, Any], address: str
               ) -> dict[str, Any]:
        discovered = pod_discovery_labels(namespace, name, labels, port["name"], port["containerPort"], "127.0.0.1")
        discovered.pop("__address__")
        return {"targets": [address], "labels": discovered}

    for job in config["scrape_configs"]:
        del job["kubernetes_sd_configs"]
        job["scrape_interval"] = job["scrape_timeout"] = "1s"
        if job["job_name"] == "modelmesh-exporter":
            job["static_configs"] = [static(RUNTIME_NAMESPACE, name, RUNTIME_POD_LABELS, sidecar_port, address)
                                     for name, address in exporters]
        else:
            job["static_configs"] = [static(deployment["metadata"]["namespace"], "modelmesh-autoscaler-0",
                                            pod["metadata"]["labels"], https, adapter)]
            assert job["authorization"] == {"credentials_file": SERVICE_ACCOUNT_TOKEN}, job
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(PROMETHEUS / "rules.yaml")]
    return with_token_file(config, token_file, PROMETHEUS_TOKEN)


def metrics_grants(user: str) -> list[dict[str, str]]:
    """The fake Kubernetes API's access rules for what the shipped ClusterRole grants, bound to `user`."""
    role = find(kustomize(PROMETHEUS), "ClusterRole", "modelmesh-autoscaler-metrics-reader")
    return [{"user": user, "verb": verb, "path": url}
            for rule in role["rules"] for url in rule["nonResourceURLs"] for verb in rule["verbs"]]


def kube_state() -> dict[str, Any]:
    """The fake Kubernetes API's tokens and grants: Prometheus's ServiceAccount bound to the shipped
    ClusterRole, and the HPA controller reading external metrics (as its built-in role allows)."""
    return {
        "tokens": {PROMETHEUS_TOKEN: {"user": PROMETHEUS_USER, "groups": ["system:serviceaccounts"]},
                   HPA_TOKEN: {"user": HPA_USER, "groups": ["system:serviceaccounts"]}},
        "allow": [*metrics_grants(PROMETHEUS_USER),
                  {"user": HPA_USER, "verb": "list", "group": "external.metrics.k8s.io"}],
    }


def data_path(workdir: Path, stack: ExitStack) -> tuple[list[tuple[str, str]], str]:
    """Fake ModelMesh containers, their exporters, a fake Kubernetes API and one adapter scraping them, all
    running in `stack`."""
    mm_ports = [free_port() for _ in range(PODS)]
    exporter_ports = [free_port() for _ in range(PODS)]
    kube_port = free_port()
    (workdir / "kube-state.yaml").write_text(yaml.safe_dump(kube_state()))
    trustme.CA().cert_pem.write_to_path(str(workdir / "client-ca.crt"))  # no client certificates here
    stack.enter_context(all_running([
        Server(["tests.fakes.kube", "--port", str(kube_port), "--state", str(workdir / "kube-state.yaml"),
                "--kubeconfig", str(workdir / "kube.yaml")],
               f"http://127.0.0.1:{kube_port}/healthz", workdir / "kube.log"),
        *(Server(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{port}", "--http",
                  "--rps", str(40 * (i + 1))],
                 f"http://127.0.0.1:{port}/metrics", workdir / f"modelmesh-{i}.log")
          for i, port in enumerate(mm_ports))]))
    stack.enter_context(all_running([
        Server(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                f"http://127.0.0.1:{mm}/metrics", "--modelmesh-interval", "0.5", "--load-window", "3"],
               f"http://127.0.0.1:{port}/metrics", workdir / f"exporter-{i}.log")
        for i, (mm, port) in enumerate(zip(mm_ports, exporter_ports, strict=True))]))
    pods = [(f"{RUNTIME_DEPLOYMENT}-5d9c7b-{i}", f"127.0.0.1:{port}") for i, port in enumerate(exporter_ports)]
    targets = workdir / "targets.yaml"
    targets.write_text(yaml.safe_dump({"runtimes": [{
        "namespace": RUNTIME_NAMESPACE, "deployment": RUNTIME_DEPLOYMENT,
        "pods": [{"name": name, "url": f"http://{address}/metrics"} for name, address in pods]}]}))
    adapter_port = free_port()
    stack.enter_context(running(
        ["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{adapter_port}", "--targets", str(targets),
         "--kubeconfig", str(workdir / "kube.yaml"), "--client-ca-file", str(workdir / "client-ca.crt"),
         "--deletion-cost", "off", "--refresh-interval", "1", "--window", "3"],
        f"https://127.0.0.1:{adapter_port}/healthz", workdir / "adapter.log"))
    return pods, f"127.0.0.1:{adapter_port}"


_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


def get_with_token(url: str, token: str) -> tuple[int, str]:
    """GET with `Authorization: Bearer <token>`, the adapter's self-signed certificate unverified; (status, body)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30, context=_UNVERIFIED) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[tuple[str, str]], str]]:
    workdir = tmp_path_factory.mktemp("live")
    with ExitStack() as stack:
        pods, adapter = data_path(workdir, stack)
        yield workdir, pods, adapter


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(processes: tuple[Path, list[tuple[str, str]], str]) -> AsyncIterator[PrometheusServer]:
    workdir, pods, adapter = processes
    hpa = asyncio.create_task(hpa_asking(adapter))
    try:
        config = shipped_config(pods, adapter, workdir / "prometheus-token")
        async with ShippedConfigPrometheus(config, workdir / "prometheus") as server:
            # Both jobs scraped, the adapter serving values, and rates over a few scrapes.
            await server.wait_for('count(up{job="modelmesh-exporter"} == 1) == 2', timeout=30)
            await server.wait_for('up{job="modelmesh-autoscaler"} == 1', timeout=30)
            await server.wait_for('modelmesh_autoscaler_served_value{metric="modelmesh_desired_replicas"}', timeout=30)
            await asyncio.sleep(4)
            yield server
    finally:
        hpa.cancel()


async def hpa_asking(adapter: str) -> None:
    """An HPA asking the adapter for the runtime's metric twice a second."""
    url = (f"https://{adapter}{EXTERNAL_METRICS}/namespaces/{RUNTIME_NAMESPACE}/modelmesh_desired_replicas"
           f"?labelSelector=deployment%3D{RUNTIME_DEPLOYMENT}")
    while True:
        await asyncio.to_thread(get_with_token, url, HPA_TOKEN)
        await asyncio.sleep(0.5)


def published_names(url: str, token: str | None = None) -> set[str]:
    """The sample names a real process declares on its /metrics (a labelled family with no series yet, such
    as an error counter before the first error, is declared by its HELP and TYPE lines)."""
    status, text = http_get(url) if token is None else get_with_token(url, token)
    assert status == 200, text
    return {name for family in text_string_to_metric_families(text) for name in family_sample_names(family)}


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_every_metric_name_in_rules_and_dashboard_is_published(
        processes: tuple[Path, list[tuple[str, str]], str], prometheus: PrometheusServer) -> None:
    """A metric renamed in the code leaves a panel or a rule silently empty: each name the rules and the
    dashboard use must be one the real processes publish (or a recording rule, kube-state-metrics' or
    Prometheus's own)."""
    _, pods, adapter = processes
    published = (published_names(f"http://{pods[0][1]}/metrics")
                 | published_names(f"https://{adapter}/metrics", PROMETHEUS_TOKEN))
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    used = set().union(*(metric_names(expr) for _, expr in every_expression()))
    # The leader gauge only from an adapter that writes to a cluster: this one has no Kubernetes API. The count of
    # stale RuntimeScales only with --per-runtime-metrics off, in place of their series: this one has them on.
    unknown = used - published - recorded - KUBE_STATE_METRICS - DCGM - {
        "up", names.GPU_BUSY_RATIO, "modelmesh_autoscaler_leader", "modelmesh_autoscaler_runtime_scales_status_stale"}
    assert not unknown, f"used by rules or dashboard, published by nothing: {sorted(unknown)}"


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_every_recording_rule_records_series(prometheus: PrometheusServer) -> None:
    empty = []
    for rule in rules():
        if "record" not in rule:
            continue
        if "without_exporter" in rule["record"]:  # every runtime here has the sidecar (test_monitoring_runtimes_
            continue                               # without_sidecar.py has one that has not)
        if "past_stall_limit" in rule["record"]:  # no refresh hangs here (test_monitoring_stalled_replica.py's does)
            continue
        try:
            await prometheus.wait_for(rule["record"], timeout=10)
        except TimeoutError:
            empty.append(rule["record"])
    assert not empty, f"recording rules with no series: {empty}"
    (labels,) = [s["metric"] for s in await prometheus.query("namespace_deployment:modelmesh_exporter_targets:count")]
    assert labels == {"__name__": "namespace_deployment:modelmesh_exporter_targets:count",
                      "namespace": RUNTIME_NAMESPACE, "deployment": RUNTIME_DEPLOYMENT}


async def finds_nothing(prometheus: PrometheusServer, promql: str) -> bool:
    """No series for `promql` within 10 s of scrapes."""
    try:
        await prometheus.wait_for(promql, timeout=10)
    except TimeoutError:
        return True
    return False


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_every_dashboard_panel_finds_data_from_real_scrapes(prometheus: PrometheusServer) -> None:
    # Each waited for, as the recording rules are: a loaded machine's first seconds of scrapes (some past their 1 s
    # timeout) can hold too few samples for a panel's rate() yet.
    empty = {title for where, expr in dashboard_queries()
             if (title := where.split("'")[1]) not in EMPTY_HERE and await finds_nothing(prometheus, expr)}
    assert not empty, f"panels that find nothing: {sorted(empty)}"
    # Empty because all is well: the panel says so, rather than Grafana's "No data", which reads as broken.
    for panel in panels():
        if EMPTY_HERE.get(panel["title"], "").startswith(("a healthy fleet", "likewise")):
            assert panel["fieldConfig"]["defaults"].get("noValue"), panel["title"]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_dashboard_variables_select_the_runtime_and_its_pods(prometheus: PrometheusServer) -> None:
    for name, selector, label in variable_queries():
        values = {series["metric"].get(label) for series in await prometheus.query(selector)}
        wanted = {"namespace": RUNTIME_NAMESPACE, "deployment": RUNTIME_DEPLOYMENT}[name]
        assert values == {wanted}, f"variable {name}: {selector} gives {values}"
    # The per-pod panels' `pod` legend names the runtime's pods, not the adapter's or the exporter's address.
    pods = {s["metric"].get("pod") for s in await prometheus.query(
        f'modelmesh_pod_requests_per_second{{namespace="{RUNTIME_NAMESPACE}", deployment="{RUNTIME_DEPLOYMENT}"}}')}
    assert pods == {f"{RUNTIME_DEPLOYMENT}-5d9c7b-{i}" for i in range(PODS)}


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_no_alert_fires_or_waits_on_a_healthy_fleet(prometheus: PrometheusServer) -> None:
    """Healthy exporters and adapter: no alert is even pending (the exporters' collectors and clocks as the real
    processes report them; an adapter without a Kubernetes API writes nothing there, so it has no leader to
    miss: ModelMeshAutoscalerNoLeader stays quiet)."""
    alerts = await prometheus.query("ALERTS")
    assert not alerts, [a["metric"] for a in alerts]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_an_adapter_reading_this_prometheus_finds_every_pod(
        processes: tuple[Path, list[tuple[str, str]], str], prometheus: PrometheusServer) -> None:
    """`--source=prometheus` joins the exporters' series to its pods on the `namespace` and `pod` labels the
    shipped relabelling gives them: an adapter reading this Prometheus serves the runtime's request load, both
    pods' rates (40 + 80 requests/s), as the one scraping the exporters does. With the Deployment's commented
    Prometheus arguments, whose --prometheus-series-selector must match the job the shipped scrape config creates
    (a selector naming another job would leave every pod without series)."""
    workdir, _, _ = processes
    shipped = [arg for arg in commented_yaml(BASE / "deployment.yaml", "read it instead:")
               if not arg.startswith(("--source=", "--prometheus-url="))]
    assert any(arg.startswith("--prometheus-series-selector=") for arg in shipped), shipped
    port = free_port()
    url = (f"https://127.0.0.1:{port}{EXTERNAL_METRICS}/namespaces/{RUNTIME_NAMESPACE}/modelmesh_request_load"
           f"?labelSelector=deployment%3D{RUNTIME_DEPLOYMENT}")

    def served() -> float | None:
        status, body = http_get(url)
        if status != 200:
            return None
        value: str = json.loads(body)["items"][0]["value"]  # a Kubernetes quantity: "120" or "119873m"
        return float(value[:-1]) / 1000 if value.endswith("m") else float(value)

    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--targets",
                  str(workdir / "targets.yaml"), "--refresh-interval", "1", "--window", "3", "--source",
                  "prometheus", "--prometheus-url", prometheus.url, *shipped],
                 f"https://127.0.0.1:{port}/healthz", workdir / "adapter-prometheus.log"):
        load = await asyncio.to_thread(poll, served, 30)
    assert load == pytest.approx(120, rel=0.1), (workdir / "adapter-prometheus.log").read_text()[-3000:]
