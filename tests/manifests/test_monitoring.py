"""Monitoring: the Prometheus scrape config, rules, PodMonitors and the Grafana dashboard.

promtool checks the config (its discovery blocks and the pod's token file stood in) and the rules and runs the
rules' unit tests; every PromQL expression is parsed
by promtool and then run against a real Prometheus holding what the scrape config would store from the real
exporter and adapter code (see `series.py`): each dashboard panel must find data there. Metric and label
names in the expressions are checked against `exporter/names.py`, the adapter's self-metrics and the served
metric names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.api.app import EXTERNAL_METRIC_ROUTE, build_api_app
from autoscaler.api.runtimes import KEDA_ROUTE
from autoscaler.api.snapshot import SnapshotHolder
from autoscaler.demo.fake_modelmesh_metrics import ModelMeshLoad
from autoscaler.names import ServedMetric
from autoscaler.ranking_hold import EXPIRED, HoldReason
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from autoscaler.sources.prometheus_promql import DCGM_GR_ENGINE_ACTIVE
from autoscaler.values_age import VALUES_AGE, VALUES_STALL_LIMIT, ValuesAge
from exporter import names
from exporter.settings import ExporterSettings
from tests.api.builders import refresher_with
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.manifests.series import ExporterPod, adapter_step, pod_discovery_labels, relabel, samples_of
from tests.manifests.support import (
    BASE,
    EXAMPLES,
    GRAFANA,
    KEDA,
    PROMETHEUS,
    PROMTOOL,
    SERVICE_ACCOUNT_TOKEN,
    container,
    find,
    installed,
    kustomize,
    label_matchers,
    load_yaml,
    metric_names,
    plain_exporter_endpoint,
    run,
    with_token_file,
)

DASHBOARD = GRAFANA / "modelmesh-autoscaler.json"
EXPORTER_JOB = "modelmesh-exporter"
ADAPTER_JOB = "modelmesh-autoscaler"
# Labels modelmesh-serving puts on every runtime pod (DESIGN §4: `modelmesh-service`, `name`).
RUNTIME_POD_LABELS = {"modelmesh-service": "modelmesh-serving", "name": "modelmesh-serving-triton",
                      "app.kubernetes.io/managed-by": "modelmesh-controller"}
# kube-state-metrics series ModelMeshRuntimeAtMaxReplicas reads; nothing else may come from outside.
KUBE_STATE_METRICS = frozenset({"kube_horizontalpodautoscaler_status_desired_replicas",
                                "kube_horizontalpodautoscaler_spec_max_replicas",
                                "kube_horizontalpodautoscaler_info"})
PROMETHEUS_OWN = frozenset({"up"})
# dcgm-exporter's series the adapter's --gpu-source=dcgm reads (the dashboard shows them beside the sidecar's).
DCGM = frozenset({names.DCGM_GPU_UTIL, DCGM_GR_ENGINE_ACTIVE})
# Grafana variables, as the test data has them.
RUNTIME_NAMESPACE = "modelmesh-serving"
RUNTIME_DEPLOYMENT = "modelmesh-serving-triton"
UNKNOWN_DEPLOYMENT = "modelmesh-serving-torchserve"
"""A runtime the adapter knows whose values it has never known (no exporter answers for it): it serves no value."""
GRAFANA_VARIABLES = {"namespace": RUNTIME_NAMESPACE, "deployment": RUNTIME_DEPLOYMENT, "__rate_interval": "1m"}


def scrape_jobs() -> dict[str, dict[str, Any]]:
    config = load_yaml(PROMETHEUS / "scrape-config.yaml")
    return {job["job_name"]: job for job in config["scrape_configs"]}


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = load_yaml(PROMETHEUS / "rules.yaml")["groups"]
    return groups


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def grafana(expr: str) -> str:
    """A dashboard expression with its Grafana variables filled in, as Grafana sends it."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in GRAFANA_VARIABLES, f"unknown dashboard variable ${name} in {expr}"
        return GRAFANA_VARIABLES[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, variables filled in."""
    return [(f"panel {p['title']!r} {t['refId']}", grafana(t["expr"])) for p in panels() for t in p["targets"]]


def variable_queries() -> list[tuple[str, str, str]]:
    """(variable, selector, label) of each `label_values(selector, label)` template variable."""
    found = []
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"].strip())
        assert match, f"variable {variable['name']}: expected label_values(selector, label)"
        found.append((variable["name"], grafana(match.group(1)), match.group(2)))
    return found


def every_expression() -> list[tuple[str, str]]:
    from_rules = [(rule.get("alert") or rule["record"], rule["expr"]) for rule in rules()]
    from_variables = [(f"variable {name}", selector) for name, selector, _ in variable_queries()]
    return from_rules + dashboard_queries() + from_variables


def family_sample_names(family: Metric) -> set[str]:
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",),
                "summary": ("_count", "_sum", "")}[family.type]
    return {family.name + suffix for suffix in suffixes}


def known_metric_names() -> set[str]:
    exported = {value for value in vars(names).values() if isinstance(value, str) and "_" in value}
    acting = AdapterMetrics()
    acting.set_leader(True)  # as an adapter that writes to the cluster publishes it
    acting.serve_live_series(lambda: None, 60.0)  # read at each scrape: process_*, the values' age and stall limit
    fleet_sized = AdapterMetrics(per_runtime=False)  # --per-runtime-metrics off: counts in place of some series
    adapter = {n for metrics in (acting, fleet_sized) for family in metrics.registry.collect()
               for n in family_sample_names(family)}
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    return exported | adapter | recorded | KUBE_STATE_METRICS | PROMETHEUS_OWN | DCGM


# ---- promtool ----


# Fields of a kubernetes_sd_config (Prometheus 2.x); Debian's promtool is built without Kubernetes discovery.
KUBERNETES_SD_FIELDS = frozenset({"role", "namespaces", "selectors", "api_server", "kubeconfig_file",
                                  "attach_metadata", "basic_auth", "authorization", "oauth2", "tls_config",
                                  "proxy_url", "follow_redirects", "enable_http2"})


def test_scrape_config_with_the_rules_passes_promtool_with_discovery_and_token_stood_in(tmp_path: Path) -> None:
    """Not the file as a user checks it (that fails, as manifests/README.md says and
    test_monitoring_checks_told.py holds it to): Debian's Prometheus has no Kubernetes service discovery, so
    promtool refuses kubernetes_sd_configs; those blocks are checked here against the fields Prometheus takes, and
    promtool checks everything else (relabel rules, TLS, rule files) with a static target in their place and a
    token file of the test's own for the pod's ServiceAccount token, which exists only in a pod."""
    config = load_yaml(PROMETHEUS / "scrape-config.yaml")
    for job in config["scrape_configs"]:
        (discovery,) = job.pop("kubernetes_sd_configs")
        assert set(discovery) <= KUBERNETES_SD_FIELDS, f"{job['job_name']}: {sorted(discovery)}"
        assert discovery["role"] == "pod"
        assert set(discovery.get("namespaces", {})) <= {"names", "own_namespace"}
        job["static_configs"] = [{"targets": ["127.0.0.1:9187"]}]
    config["rule_files"] = [str(PROMETHEUS / "rules.yaml")]
    wrapped = tmp_path / "prometheus.yml"
    wrapped.write_text(yaml.safe_dump(with_token_file(config, tmp_path / "token")))
    done = run([PROMTOOL, "check", "config", str(wrapped)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_pass_promtool_check_and_their_unit_tests() -> None:
    checked = run([PROMTOOL, "check", "rules", "rules.yaml"], cwd=PROMETHEUS)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run([PROMTOOL, "test", "rules", "rules_test.yaml"], cwd=PROMETHEUS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_rule_has_a_unit_test() -> None:
    tests = load_yaml(PROMETHEUS / "rules_test.yaml")["tests"]
    alerts_tested = {case["alertname"] for test in tests for case in test.get("alert_rule_test", [])
                     if case.get("exp_alerts")}
    exprs_tested = {case["expr"] for test in tests for case in test.get("promql_expr_test", [])}
    assert {rule["alert"] for rule in rules() if "alert" in rule} <= alerts_tested, "each alert seen firing"
    assert {rule["record"] for rule in rules() if "record" in rule} <= exprs_tested


def test_every_recording_rule_is_read_by_an_alert_or_the_dashboard() -> None:
    """rules.yaml said its recording rules were what the dashboard and the alerts compare against, while four
    of them were read by nothing: Prometheus evaluated a series per runtime for each, every interval, for nobody."""
    recorded = [rule["record"] for rule in rules() if "record" in rule]  # rules.yaml read once, not per expression
    readers = [expr for name, expr in every_expression() if name not in recorded]
    used = set().union(*(metric_names(expr) for expr in readers))
    unread = [name for name in recorded if name not in used]
    assert not unread, f"recorded, read by no alert or panel: {unread}"


def test_every_expression_parses(tmp_path: Path) -> None:
    # promtool parses every expression of a rules file: wrap the dashboard's into one.
    wrapped = {"groups": [{"name": "parse-check", "rules": [
        {"record": f"check:expr_{index}", "expr": expr} for index, (_, expr) in enumerate(every_expression())
    ]}]}
    path = tmp_path / "expressions.yaml"
    path.write_text(yaml.safe_dump(wrapped))
    done = run([PROMTOOL, "check", "rules", str(path)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_rule_object_carries_the_rules_file() -> None:
    prometheus_rule = find(kustomize(PROMETHEUS), "PrometheusRule")
    assert prometheus_rule["spec"]["groups"] == rule_groups()


# ---- names and labels ----


def test_metric_names_in_rules_and_dashboard_exist() -> None:
    known = known_metric_names()
    for where, expr in every_expression():
        found = metric_names(expr)
        assert found, f"{where}: no metric name found in {expr!r}"
        assert found <= known, f"{where}: unknown metric {sorted(found - known)} in {expr!r}"


def test_label_values_in_expressions_are_ones_the_code_produces() -> None:
    jobs = set(scrape_jobs())
    for where, expr in every_expression():
        for label, operator, value in label_matchers(expr):
            if label == "job":  # one job, or several (`=~"a|b"`), each a scrape job
                named = value.split("|") if operator == "=~" else [value]
                assert operator in ("=", "=~") and set(named) <= jobs, f"{where}: job {value!r}"
            elif label == "metric":
                assert value in set(ServedMetric), f"{where}: {value!r} is not a served metric"
            elif label == "collector":
                assert value in {names.COLLECTOR_GPU, names.COLLECTOR_MODELMESH}, f"{where}: collector {value!r}"
            elif label == "path":  # HPAs ask the external metrics API; KEDA (examples/keda) its own route
                for route in (EXTERNAL_METRIC_ROUTE, KEDA_ROUTE):
                    assert operator == "=~" and re.fullmatch(value, route), f"{where}: path {value!r} misses {route}"


async def path_labels_of(client: Any, metrics: AdapterMetrics, urls: list[str]) -> set[str]:
    """The `path` labels of `modelmesh_autoscaler_api_requests_total` that GETs of `urls` add."""
    def labels() -> set[str]:
        metrics.tally.flush()
        return {sample.labels["path"] for family in metrics.registry.collect()
                if family.name == "modelmesh_autoscaler_api_requests" for sample in family.samples}

    before = labels()
    for url in urls:
        async with client.get(url) as response:
            await response.read()
    return labels() - before


METRIC_READS = [f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{RUNTIME_NAMESPACE}/modelmesh_desired_replicas"
                f"?labelSelector=deployment%3D{RUNTIME_DEPLOYMENT}",
                f"/keda/v1/namespaces/{RUNTIME_NAMESPACE}/runtimes/{RUNTIME_DEPLOYMENT}"]
"""The requests HPAs and KEDA make for a runtime's values."""
NOT_METRIC_READS = ["/apis", "/apis/external.metrics.k8s.io", "/apis/external.metrics.k8s.io/v1beta1",
                    "/apis/external.metrics.k8s.io/v1beta1/", "/openapi/v2", "/version", "/healthz", "/readyz",
                    "/metrics", f"/debug/runtimes/{RUNTIME_NAMESPACE}/{RUNTIME_DEPLOYMENT}", "/apis/other.group"]
"""Discovery (the aggregator checks the APIService's availability with it, and every client discovers the group),
OpenAPI, health, the adapter's own metrics, /debug and a path nothing serves."""


async def test_the_external_metric_request_counts_are_metric_reads_only(aiohttp_client: Any) -> None:
    """The 503 alert's share and the "External metrics API answers" panel count the answers HPAs and KEDA get
    for values. They selected `path=~"/apis/.+|/keda/.+"`, which took in discovery's 200s too: a fleet answered
    503 for every value read stayed under the alert's 5% while discovery ran, and the panel showed discovery as
    requests from HPAs."""
    metrics = AdapterMetrics()
    client = await aiohttp_client(build_api_app(SnapshotHolder(), metrics))
    reads = await path_labels_of(client, metrics, METRIC_READS)
    others = await path_labels_of(client, metrics, NOT_METRIC_READS)
    assert reads and others
    selectors = [(where, expr) for where, expr in every_expression() if "api_requests_total" in expr]
    assert selectors
    for where, expr in selectors:
        for selector in re.findall(r"modelmesh_autoscaler_api_requests_total(\{[^}]*\})", expr):
            matchers = [matcher for matcher in label_matchers(selector) if matcher[0] == "path"]
            for path in reads:
                assert selects(matchers, {"path": path}), f"{where}: {selector} leaves out {path}"
            for path in others:
                assert not selects(matchers, {"path": path}), f"{where}: {selector} counts {path}"


async def test_the_first_expired_hold_of_an_adapter_is_an_increase_prometheus_sees(aiohttp_client: Any) -> None:
    """The stale-costs alert reads `increase(...{reason="expired"}[15m])`: a series that first appears at 1 has
    no increase in Prometheus, so an adapter whose first hold expired never alerted. A fresh adapter's /metrics
    carries every reason at 0 before any hold."""
    metrics = AdapterMetrics()
    client = await aiohttp_client(build_api_app(refresher_with(metrics=metrics), metrics))
    response = await client.get("/metrics")
    assert response.status == 200
    holds = {sample.labels["reason"]: sample.value for family in text_string_to_metric_families(await response.text())
             for sample in family.samples if sample.name == "modelmesh_autoscaler_scale_down_holds_total"}
    assert holds == {reason: 0.0 for reason in (*HoldReason, EXPIRED)}


def hpa_info_labels(namespace: str, name: str, target: dict[str, str]) -> dict[str, str]:
    """The labels kube-state-metrics gives `kube_horizontalpodautoscaler_info` for an HPA (internal/store/hpa.go:
    the scale target's kind and name, and its apiVersion when set)."""
    labels = {"namespace": namespace, "horizontalpodautoscaler": name,
              "scaletargetref_kind": target["kind"], "scaletargetref_name": target["name"]}
    if target.get("apiVersion"):
        labels["scaletargetref_api_version"] = target["apiVersion"]
    return labels


def selects(matchers: list[tuple[str, str, str]], labels: dict[str, str]) -> bool:
    """Whether a series with these labels matches every label matcher (PromQL regexes are anchored)."""
    for label, operator, value in matchers:
        actual = labels.get(label, "")
        matched = re.fullmatch(value, actual) is not None if "~" in operator else actual == value
        if matched != (operator in {"=", "=~"}):
            return False
    return True


def test_the_at_max_replicas_alert_watches_the_hpas_the_examples_ship() -> None:
    """The shipped HPA, and the one KEDA makes from the ScaledObject, scale a RuntimeScale, not the runtime
    Deployment: the alert must pick them out of kube-state-metrics' HPAs, and leave other HPAs alone."""
    (rule,) = [r for r in rules() if r.get("alert") == "ModelMeshRuntimeAtMaxReplicas"]
    (selector,) = re.findall(r"kube_horizontalpodautoscaler_info(\{[^}]*\})", rule["expr"])
    matchers = label_matchers(selector)
    hpa = find(kustomize(EXAMPLES), "HorizontalPodAutoscaler")
    scaled = find(installed(KEDA), "ScaledObject")
    shipped = {
        "hpa-triton.yaml": hpa_info_labels(hpa["metadata"]["namespace"], hpa["metadata"]["name"],
                                           hpa["spec"]["scaleTargetRef"]),
        "keda/scaled-object-triton.yaml": hpa_info_labels(
            scaled["metadata"]["namespace"], scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"],
            scaled["spec"]["scaleTargetRef"]),
    }
    for source, labels in shipped.items():
        assert selects(matchers, labels), f"{source}: its HPA {labels} is not selected by {selector}"
    other = hpa_info_labels("web", "web", {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    assert not selects(matchers, other), f"{selector} selects an HPA of a plain Deployment"


def test_scrape_config_targets_exporters_and_adapter_only() -> None:
    jobs = scrape_jobs()
    assert set(jobs) == {EXPORTER_JOB, ADAPTER_JOB}
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    sidecar = container(runtime["spec"], "autoscaler-exporter")
    (sidecar_port,) = sidecar["ports"]
    exporter = jobs[EXPORTER_JOB]

    def discovered(port_name: str, port: int, pod_labels: dict[str, str] = RUNTIME_POD_LABELS) -> dict[str, str]:
        return pod_discovery_labels(RUNTIME_NAMESPACE, "modelmesh-serving-triton-0", pod_labels, port_name, port,
                                    "10.0.0.1")

    target = relabel(exporter, discovered(sidecar_port["name"], sidecar_port["containerPort"]))
    assert target == {"job": EXPORTER_JOB, "namespace": RUNTIME_NAMESPACE, "pod": "modelmesh-serving-triton-0",
                      "deployment": RUNTIME_DEPLOYMENT, "instance": f"10.0.0.1:{sidecar_port['containerPort']}"}
    assert relabel(exporter, discovered("prometheus", 2112)) is None, "ModelMesh's own port is not ours"
    assert relabel(exporter, discovered(sidecar_port["name"], 9187, {"app": "web"})) is None, "only ModelMesh pods"
    assert exporter.get("honor_labels", False) is False
    assert sidecar_port["containerPort"] == ExporterSettings().listen_port == ServeSettings().exporter_port

    deployment = find(kustomize(BASE), "Deployment")
    pod = deployment["spec"]["template"]
    (https,) = container(pod["spec"], "adapter")["ports"]
    adapter_target = relabel(jobs[ADAPTER_JOB], pod_discovery_labels(
        deployment["metadata"]["namespace"], "modelmesh-autoscaler-0", pod["metadata"]["labels"], https["name"],
        https["containerPort"], "10.0.0.9"))
    assert adapter_target is not None and adapter_target["job"] == ADAPTER_JOB
    assert jobs[ADAPTER_JOB]["honor_labels"] is True, "per-runtime series keep the runtime's namespace"
    assert jobs[ADAPTER_JOB]["scheme"] == "https"


def test_pod_monitors_match_the_scrape_config() -> None:
    objects = kustomize(PROMETHEUS)
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    sidecar = container(runtime["spec"], "autoscaler-exporter")
    adapter = container(find(kustomize(BASE), "Deployment")["spec"]["template"]["spec"], "adapter")
    jobs = scrape_jobs()
    for monitor_name, job, ports in ((EXPORTER_JOB, EXPORTER_JOB, sidecar["ports"]),
                                     (ADAPTER_JOB, ADAPTER_JOB, adapter["ports"])):
        endpoints = find(objects, "PodMonitor", monitor_name)["spec"]["podMetricsEndpoints"]
        (endpoint,) = [e for e in endpoints if e["port"] in {p["name"] for p in ports}]
        assert endpoint.get("honorLabels", False) == jobs[job].get("honor_labels", False)
        assert endpoint.get("scheme", "http") == jobs[job].get("scheme", "http")
        relabelled = {r["targetLabel"]: r for r in endpoint["relabelings"] if "targetLabel" in r}
        assert relabelled["job"]["replacement"] == job
        # The operator adds namespace and pod itself; the rest must be relabelled like the scrape config.
        wanted = {r["target_label"] for r in jobs[job]["relabel_configs"] if "target_label" in r}
        # The scheme is each endpoint's: the operator selects a port by name, one endpoint per sidecar's port.
        assert wanted - {"namespace", "pod", "__scheme__"} <= set(relabelled), f"{monitor_name}: missing labels"


def test_the_adapter_scrape_sends_a_token_granted_get_on_metrics() -> None:
    """The adapter authorizes /metrics (`get` on the non-resource URL): the plain job sends the pod's
    ServiceAccount token, and the PodMonitor a token Secret of a ServiceAccount the shipped binding grants
    exactly that. Without them the upgraded adapter's target would be down with 401."""
    assert scrape_jobs()[ADAPTER_JOB]["authorization"] == {"credentials_file": SERVICE_ACCOUNT_TOKEN}
    objects = kustomize(PROMETHEUS)
    (endpoint,) = find(objects, "PodMonitor", ADAPTER_JOB)["spec"]["podMetricsEndpoints"]
    assert endpoint["authorization"]["type"] == "Bearer"
    credentials = endpoint["authorization"]["credentials"]
    secret = find(objects, "Secret", credentials["name"])
    assert secret["type"] == "kubernetes.io/service-account-token" and credentials["key"] == "token"
    monitor_namespace = find(objects, "PodMonitor", ADAPTER_JOB)["metadata"]["namespace"]
    assert secret["metadata"]["namespace"] == monitor_namespace, "the operator reads the Secret beside the monitor"
    account = find(objects, "ServiceAccount", secret["metadata"]["annotations"]["kubernetes.io/service-account.name"])
    role = find(objects, "ClusterRole", "modelmesh-autoscaler-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], "that, and nothing more"
    bindings = [b for b in objects
                if b["kind"] == "ClusterRoleBinding" and b["roleRef"]["name"] == role["metadata"]["name"]]
    subjects = [s for b in bindings for s in b["subjects"]]
    assert {"kind": "ServiceAccount", "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"]} in subjects


# ---- the dashboard ----


def test_dashboard_layout_is_consistent() -> None:
    document = dashboard()
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for panel in document["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                 for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & taken, f"panel {panel['title']!r} overlaps another"
        taken |= cells
        if panel["type"] != "row":
            refs = [t["refId"] for t in panel["targets"]]
            assert len(refs) == len(set(refs)) and panel["datasource"]["uid"] == "${datasource}"
    variables = [v["name"] for v in document["templating"]["list"]]
    assert variables == ["datasource", "namespace", "deployment"]


# ---- a real Prometheus ----


STALL_LIMIT_S = ServeSettings().stalled_after_s
"""Each stored replica's values_stall_limit_seconds: the shipped defaults' (60 s)."""
STALLED_FROM_STEP = 14
"""The second stored replica's refresh hangs after its 14th scrape (of 20, 15 s apart): its values are 92 s old
at the last (six scrapes and the 2 s each refresh's values are old at a scrape), past its 60 s limit; the first
replica's are 2 s old."""


def stored_series(now: float) -> Iterator[Sample]:
    """Five minutes of what Prometheus stores from two runtime pods' exporters and two adapter replicas."""
    jobs = scrape_jobs()
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    (port,) = container(runtime["spec"], "autoscaler-exporter")["ports"]
    deployment = find(kustomize(BASE), "Deployment")
    (https,) = container(deployment["spec"]["template"]["spec"], "adapter")["ports"]
    start = now - 300.0
    pods = {}
    for index, (rps, busy) in enumerate(((380.0, 0.9), (40.0, 0.2))):
        name = f"{RUNTIME_DEPLOYMENT}-{index}"
        labels = {**RUNTIME_POD_LABELS, "name": RUNTIME_DEPLOYMENT}
        target = relabel(jobs[EXPORTER_JOB], pod_discovery_labels(
            RUNTIME_NAMESPACE, name, labels, port["name"], port["containerPort"], f"10.0.0.{index + 1}"))
        assert target is not None
        load = ModelMeshLoad(requests_per_second=rps, queue_delay_ms=30.0 * (1 - index), cache_misses_per_second=1.0)
        pods[name] = (ExporterPod(load, busy, f"GPU-{index}", start), target)
    replicas = []
    refreshed: dict[int, float] = {}  # each replica's last new values (its ValuesAge's clock: the scrape's time)
    scraped_at = start
    for index in range(2):
        target = relabel(jobs[ADAPTER_JOB], pod_discovery_labels(
            deployment["metadata"]["namespace"], f"modelmesh-autoscaler-{index}",
            deployment["spec"]["template"]["metadata"]["labels"], https["name"], https["containerPort"],
            f"10.0.1.{index + 1}"))
        assert target is not None
        metrics = AdapterMetrics()
        metrics.registry.register(ValuesAge(partial(refreshed.get, index), STALL_LIMIT_S, clock=lambda: scraped_at))
        replicas.append((metrics, target))
    served = {ServedMetric.DESIRED_REPLICAS: 3.2, ServedMetric.GPU_BUSY: 0.72, ServedMetric.REQUEST_LOAD: 540.0,
              ServedMetric.CACHE_PRESSURE: 0.0}
    honor_exporter = bool(jobs[EXPORTER_JOB].get("honor_labels", False))
    honor_adapter = bool(jobs[ADAPTER_JOB].get("honor_labels", False))
    for step in range(1, 21):
        at = start + 15.0 * step
        for index, (pod, target) in enumerate(pods.values()):
            pod.step(at, modelmesh_fails=(index, step) == (1, 18))  # in the last minute: the errors panel's rate
            yield from samples_of(pod.registry, target, honor_exporter, at)
        yield from dcgm_samples(list(pods), at)
        scraped_at = at
        for index, (metrics, target) in enumerate(replicas):
            if index == 0 or step <= STALLED_FROM_STEP:  # the second replica's refresh hangs from then on
                refreshed[index] = at - 2.0
            adapter_step(metrics, RUNTIME_NAMESPACE, RUNTIME_DEPLOYMENT, list(pods), served.__getitem__)
            metrics.runtime_known.update({(RUNTIME_NAMESPACE, RUNTIME_DEPLOYMENT): 1,
                                          (RUNTIME_NAMESPACE, UNKNOWN_DEPLOYMENT): 0})
            if step >= 12:
                metrics.scale_down_holds.labels("expired").inc()
            yield from samples_of(metrics.registry, target, honor_adapter, at)


def dcgm_samples(pods: list[str], at: float) -> Iterator[Sample]:
    """One scrape of a node's dcgm-exporter (`--kubernetes`, its labels honored): the first pod holds a whole
    GPU, the second a MIG instance (graphics engine activity only: DCGM has no utilization per instance)."""
    node = {"job": "dcgm-exporter", "instance": "10.0.3.7:9400", "modelName": "NVIDIA A100-SXM4-80GB",
            "Hostname": "gpu-node-1"}
    whole = node | {"gpu": "0", "UUID": "GPU-5f1c", "device": "nvidia0", "namespace": RUNTIME_NAMESPACE,
                    "pod": pods[0], "container": "triton"}
    instance = node | {"gpu": "1", "UUID": "GPU-9a2e", "device": "nvidia1", "GPU_I_PROFILE": "3g.40gb",
                       "GPU_I_ID": "2", "namespace": RUNTIME_NAMESPACE, "pod": pods[1], "container": "triton"}
    yield Sample(names.DCGM_GPU_UTIL, whole, 85.0, at)
    # A pod of another runtime whose name extends this one's (triton and triton-2.x) on the same node.
    other = node | {"gpu": "2", "UUID": "GPU-3b7d", "device": "nvidia2", "namespace": RUNTIME_NAMESPACE,
                    "pod": f"{RUNTIME_DEPLOYMENT}-2.x-6c8f9d7b5-x2k4q", "container": "triton"}
    yield Sample(names.DCGM_GPU_UTIL, other, 55.0, at)
    yield Sample(DCGM_GR_ENGINE_ACTIVE, whole, 0.8, at)
    yield Sample(DCGM_GR_ENGINE_ACTIVE, instance, 0.3, at)


@pytest.mark.asyncio(loop_scope="module")
async def test_the_gpu_panel_shows_dcgm_busy_per_pod_as_the_adapter_reads_it(prometheus: PrometheusServer) -> None:
    """The whole GPU's utilization (percent), the MIG instance's engine activity (a ratio), each per pod; not the
    pods of another runtime whose name extends this one's (`pod=~"$deployment-.+"` alone took them in)."""
    (expr,) = [expr for where, expr in dashboard_queries() if where == "panel 'GPU busy' B"]
    shown = {series["metric"]["pod"]: float(series["value"][1]) for series in await prometheus.query(expr)}
    assert shown == {f"{RUNTIME_DEPLOYMENT}-0": pytest.approx(0.85), f"{RUNTIME_DEPLOYMENT}-1": pytest.approx(0.3)}


@pytest.mark.asyncio(loop_scope="module")
async def test_a_panel_shows_scale_down_holds_by_reason(prometheus: PrometheusServer) -> None:
    """`modelmesh_autoscaler_scale_down_holds_total` was on no panel: a scale-down that went ahead with stale
    deletion costs (`expired`: the wrong pod may have been removed) showed only in a replica's /metrics."""
    queries = [expr for _, expr in dashboard_queries() if "modelmesh_autoscaler_scale_down_holds_total" in expr]
    assert queries, "no dashboard panel reads modelmesh_autoscaler_scale_down_holds_total"
    shown = {series["metric"]["reason"]: float(series["value"][1])
             for expr in queries for series in await prometheus.query(expr)}
    assert set(shown) == {*HoldReason, EXPIRED} and shown["expired"] > 0 and shown["queued"] > 0, shown
    assert not any(shown[reason] for reason in HoldReason if reason != HoldReason.QUEUED), shown


@pytest.mark.asyncio(loop_scope="module")
async def test_a_panel_shows_each_replicas_values_age_against_its_stall_limit(prometheus: PrometheusServer) -> None:
    """The values' age and the replica's stall limit were on no panel: a replica whose refresh hung (503 for every
    runtime, /livez failing, ModelMeshAutoscalerRefreshStalled 4 minutes past the limit) showed on the dashboard
    only as its other series standing still, as the refresh last wrote them."""
    # Other panels read the age too, to leave such a replica out (test_monitoring_stalled_replica.py): the one that
    # draws it reads nothing else.
    reading = [p for p in panels() if any(VALUES_AGE in t["expr"] for t in p["targets"])
               and all(metric_names(t["expr"]) <= {VALUES_AGE, VALUES_STALL_LIMIT} for t in p["targets"])]
    assert len(reading) == 1, f"dashboard panels drawing {VALUES_AGE}: {[p['title'] for p in reading]}"
    (panel,) = reading
    drawn = {t["legendFormat"]: await prometheus.query(grafana(t["expr"])) for t in panel["targets"]}
    ages = {series["metric"]["pod"]: float(series["value"][1])
            for expr, found in drawn.items() if "{{pod}}" in expr for series in found}
    limits = [float(series["value"][1]) for legend, found in drawn.items() if "{{pod}}" not in legend
              for series in found]
    assert ages == {"modelmesh-autoscaler-0": 2.0, "modelmesh-autoscaler-1": 92.0}, drawn
    assert limits == [60.0], f"the panel does not draw the stall limit ({VALUES_STALL_LIMIT}): {drawn}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PrometheusServer]:
    workdir = tmp_path_factory.mktemp("prometheus")
    now = time.time()
    tsdb = create_blocks(openmetrics_text(stored_series(now)), workdir / "tsdb")
    async with PrometheusServer(tsdb_dir=tsdb, workdir=workdir) as server:
        yield server


@pytest.mark.asyncio(loop_scope="module")
async def test_every_dashboard_panel_finds_data(prometheus: PrometheusServer) -> None:
    empty = [f"{where}: {expr}" for where, expr in dashboard_queries() if not await prometheus.query(expr)]
    assert not empty, "queries that find nothing in what the scrape config stores:\n" + "\n".join(empty)


@pytest.mark.asyncio(loop_scope="module")
async def test_dashboard_variables_list_the_runtime(prometheus: PrometheusServer) -> None:
    for name, selector, label in variable_queries():
        values = {series["metric"].get(label) for series in await prometheus.query(selector)}
        assert GRAFANA_VARIABLES[name] in values, f"variable {name}: {selector} gives {values}"


@pytest.mark.asyncio(loop_scope="module")
async def test_the_runtime_list_has_a_runtime_whose_values_were_never_known(prometheus: PrometheusServer) -> None:
    """The runtime list came from the served values, which a runtime has none of while its values are unknown:
    the runtime that most needed the dashboard (unknown since it started) could not be picked, while
    ModelMeshRuntimeValuesUnknown named it."""
    variables = {name: (selector, label) for name, selector, label in variable_queries()}
    selector, label = variables["deployment"]
    listed = {series["metric"].get(label) for series in await prometheus.query(selector)}
    assert UNKNOWN_DEPLOYMENT in listed, f"{selector} gives {listed}"
    assert not await prometheus.query(
        f'modelmesh_autoscaler_served_value{{deployment="{UNKNOWN_DEPLOYMENT}"}}'), "a runtime that serves nothing"


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("job", ["modelmesh-exporter", "modelmesh-autoscaler"])
async def test_dashboard_variables_list_the_runtime_from_either_job_alone(prometheus: PrometheusServer,
                                                                         job: str) -> None:
    """The variables came from exporter series alone: a Prometheus that scrapes only the adapter (the exporters
    scraped by the adapter itself) showed an empty dashboard, its runtime panels included."""
    for name, selector, label in variable_queries():
        assert selector.endswith("}"), selector
        only = f'{selector[:-1]}, job="{job}"}}'
        values = {series["metric"].get(label) for series in await prometheus.query(only)}
        assert GRAFANA_VARIABLES[name] in values, f"variable {name}: {only} gives {values}"


@pytest.mark.asyncio(loop_scope="module")
async def test_every_rule_expression_runs_on_a_real_prometheus(prometheus: PrometheusServer) -> None:
    for rule in rules():
        await prometheus.query(rule["expr"])  # raises on any error


# ---- Grafana's own schema ----

GRAFANA_PACKAGES = ("@grafana/schema@13.2.3", "typescript@7.0.2")
GRAFANA_CHECK = """\
import type {Dashboard} from "@grafana/schema";
import type {FieldConfig, Options} from \
"@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";
// JSON has no enums: accept each string enum member by its value.
type Json<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T
  : T extends (infer U)[] ? Json<U>[] : T extends object ? {[K in keyof T]: Json<T[K]>} : T;
export const dashboard: Json<Dashboard> = %s;
export const options: Json<Options>[] = %s;
export const custom: Json<FieldConfig>[] = %s;
"""


def grafana_schema_dir() -> Path:
    """`@grafana/schema` and TypeScript from npm, installed once into the user's cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modelmesh-autoscaler" / "grafana"
    tsc = cache / "node_modules" / ".bin" / "tsc"
    if tsc.exists():
        return cache
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the dashboard is not type-checked against @grafana/schema")
    cache.mkdir(parents=True, exist_ok=True)
    done = run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), *GRAFANA_PACKAGES],
               timeout=180)
    if done.returncode != 0 or not tsc.exists():
        pytest.skip(f"npm could not install {' '.join(GRAFANA_PACKAGES)}:\n{done.stderr[-2000:]}")
    return cache


@pytest.mark.slow
def test_dashboard_type_checks_against_grafana_schema() -> None:
    cache = grafana_schema_dir()
    document = dashboard()
    series = [p for p in document["panels"] if p["type"] == "timeseries"]
    source = GRAFANA_CHECK % (json.dumps(document), json.dumps([p["options"] for p in series]),
                              json.dumps([p["fieldConfig"]["defaults"].get("custom", {}) for p in series]))
    check = cache / "check.ts"
    check.write_text(source)
    done = run([str(cache / "node_modules" / ".bin" / "tsc"), "--noEmit", "--strict", "--skipLibCheck",
                "--moduleResolution", "bundler", "--module", "esnext", "--target", "es2020", str(check)],
               cwd=cache, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def seconds(duration: str) -> float:
    """A Prometheus duration of one unit ("15s", "1m") in seconds."""
    match = re.fullmatch(r"(\d+)(s|m)", duration)
    assert match, duration
    return float(match.group(1)) * (60 if match.group(2) == "m" else 1)


def test_exporter_scrapes_keep_data_fresher_than_the_adapters_max_staleness() -> None:
    """With `--source=prometheus` a pod's data is as old as its last scrape (interval, plus the timeout of a slow
    one) plus the exporter's read of ModelMesh before it: beyond `max_staleness_s` its pods read stale between
    scrapes and the runtime cannot scale down."""
    from autoscaler.policies.policy import RuntimePolicy

    budget = RuntimePolicy().max_staleness_s
    read = ExporterSettings().modelmesh_interval_s
    job = scrape_jobs()[EXPORTER_JOB]
    endpoint = plain_exporter_endpoint(find(kustomize(PROMETHEUS), "PodMonitor", EXPORTER_JOB))
    for where, interval, timeout in (("scrape-config.yaml", job["scrape_interval"], job["scrape_timeout"]),
                                     ("pod-monitor-exporter.yaml", endpoint["interval"], endpoint["scrapeTimeout"])):
        oldest = seconds(interval) + seconds(timeout) + read
        assert oldest < budget, f"{where}: data up to {oldest:g} s old, max_staleness_s {budget:g} s"
