"""One tenant's namespace whose pods the adapter may not watch holds that namespace's runtimes, not the fleet's.

A platform team serves two namespaces (`--namespaces team-a,team-b`, the namespaced overlay) and team-b's
RoleBinding lacks pods (or its namespace is being deleted, or the API fails for it alone): the API server refuses
team-b's pod list and watch with RBAC's 403. Pod discovery was one flag for every namespace, so team-a's runtime
answered 503 (then "metric source down") too, and nothing in the cluster could scale down. Now team-a's runtime is
served and falls as its smoothing allows, while team-b's holds and its /debug quotes the 403.

The real `serve` over the fake Kubernetes API, real exporters on the pods' IPs, read with kubectl.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics, attach
from tests.manifests.support import PROMTOOL, alerts_sent, promtool_test_rules
from tests.support.api_peek import peek_raw
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, http_get, running

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]  # the shared fake API runs in this loop

SERVED = "team-a"
REFUSED = "team-b"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
PODS = {"triton-0": "127.0.0.4", "triton-1": "127.0.0.5"}  # team-a's, 10 req/s each: one pod's worth at 100


async def answered(read: Callable[[], tuple[int, Any]], wanted: Callable[[int, Any], bool],
                   timeout: float = 60.0) -> Any:
    """Read with kubectl until the answer is `wanted`; else fail with the last answer, which says why."""
    last: tuple[int, Any] = (0, None)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while not wanted(*(last := await asyncio.to_thread(read))):
                await asyncio.sleep(0.5)
            return last[1]
    raise AssertionError(f"after {timeout:g} s still {last}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def adapter(tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> AsyncIterator[tuple[Path, str]]:
    """`serve --namespaces team-a,team-b` where team-b's (parametrized indirectly) resources named are refused from
    the start: kubectl's kubeconfig and the adapter's URL. One for the tests of each refusal: they only read it
    (what kubectl, /debug and /metrics say), so they need not start two pods' exporters and an adapter each."""
    refused: tuple[str, ...] = request.param
    tmp_path = tmp_path_factory.mktemp("-".join(refused))
    exporter_port, adapter_port = free_port(), free_port()
    runners: list[web.AppRunner] = []
    async with FakeKubeApi() as kube:
        for namespace in (SERVED, REFUSED):
            kube.add_deployment(namespace, DEPLOYMENT, replicas=2, labels=SELECTOR, selector=SELECTOR,
                                annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        for resource in refused:
            kube.forbid("list", resource, REFUSED)
            kube.forbid("watch", resource, REFUSED)
        with contextlib.ExitStack() as stack:
            try:
                for name, ip in PODS.items():
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=10.0)), namespace=SERVED,
                        name=name, ip=ip, labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                kube.add_pod(REFUSED, "triton-0", labels={**SELECTOR, "pod-template-hash": "abc"})
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--namespaces", f"{SERVED},{REFUSED}", "--exporter-port", str(exporter_port),
                     "--refresh-interval", "1", "--window", "3", "--scale-down-tau", "1", "--leader-elect", "false"],
                    f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
                url = f"https://127.0.0.1:{adapter_port}"
                yield write_kubeconfig(tmp_path / "adapter.kubeconfig", url), url
            finally:
                for runner in runners:
                    await runner.cleanup()


def desired(kubeconfig: Path, namespace: str, *, peek: bool = False) -> tuple[int, Any]:
    """kubectl's answer; `peek`: the same GET from the test process, for waiting (`api_peek`)."""
    return (peek_raw if peek else get_raw)(
        kubeconfig, f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/"
                    f"modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}")


def debug(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    code, document = get_raw(kubeconfig, f"/debug/runtimes/{namespace}/{DEPLOYMENT}")
    assert code == 0, document
    return dict(document)


def values_known(url: str) -> dict[str, float]:
    """`modelmesh_autoscaler_runtime_values_known` by namespace, as Prometheus scrapes it (the alert
    ModelMeshRuntimeValuesUnknown reads it)."""
    exposition = http_get(url + "/metrics")[1]
    return {namespace: float(value) for namespace, value in re.findall(
        rf'modelmesh_autoscaler_runtime_values_known{{deployment="{DEPLOYMENT}",namespace="([^"]+)"}} (\S+)',
        exposition)}


@pytest.mark.parametrize("adapter", [("pods",)], indirect=True, ids=["pods"])
async def test_a_namespace_whose_pods_are_refused_holds_its_runtimes_only(adapter: tuple[Path, str]) -> None:
    kubeconfig, url = adapter
    # 20 req/s at 100 per pod: team-a's 2 replicas fall to 1, its values fresh, whatever team-b's RBAC.
    def one(code: int, body: Any) -> bool:
        return code == 0 and body["items"][0]["value"] in ("1", "1000m")

    await answered(lambda: desired(kubeconfig, SERVED, peek=True), one)
    await answered(lambda: desired(kubeconfig, SERVED), one)
    mine = debug(kubeconfig, SERVED)
    assert [p for p in mine["source"]["problems"] if p["reason"] == "discovery"] == [], mine["source"]
    assert REFUSED not in json.dumps(mine)
    assert await asyncio.to_thread(values_known, url) == {SERVED: 1.0, REFUSED: 0.0}

    code, said = desired(kubeconfig, REFUSED)  # team-b holds: 503, pointing at its /debug
    assert code != 0 and "pod discovery out of date" in str(said) and "metric source" not in str(said), said
    assert f"/debug/runtimes/{REFUSED}/{DEPLOYMENT}" in str(said), said
    theirs = debug(kubeconfig, REFUSED)
    [problem] = [p for p in theirs["source"]["problems"] if p["reason"] == "discovery"]
    assert 'cannot list resource \\"pods\\"' in json.dumps(problem) or \
        'cannot watch resource \\"pods\\"' in json.dumps(problem), problem
    assert f'in the namespace \\"{REFUSED}\\"' in json.dumps(problem), problem


DISCOVERY_HEALTHY = "modelmesh_autoscaler_discovery_healthy"


def discovery_health(url: str) -> dict[str, float]:
    """`modelmesh_autoscaler_discovery_healthy` by namespace, read over HTTPS from the adapter's /metrics."""
    return {sample.labels.get("namespace", ""): sample.value
            for sample in adapter_metrics(url.removeprefix("https://")) if sample.name == DISCOVERY_HEALTHY}


def stored_for(url: str, minutes: int) -> list[dict[str, str]]:
    """The discovery series of the adapter's /metrics as Prometheus stores them with the shipped scrape config
    (`honor_labels`: the watched namespace, not the adapter's), held for `minutes`, as promtool input."""
    target = ", ".join(f'{key}="{value}"' for key, value in sorted(ADAPTER_LABELS.items()))
    series = [{"series": f"up{{{target}}}", "values": f"1x{minutes}"}]  # the adapter is scraped
    for sample in adapter_metrics(url.removeprefix("https://")):
        if sample.name == DISCOVERY_HEALTHY:
            labels = attach(ADAPTER_LABELS, dict(sample.labels), honor_labels=True)
            text = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
            series.append({"series": f"{sample.name}{{{text}}}", "values": f"{sample.value:g}x{minutes}"})
    return series


def firing(minute: int, expected: list[dict[str, str]]) -> dict[str, object]:
    """A promtool check that the alerts firing at `minute`, by alert name and namespace, are `expected`."""
    return {"expr": 'count by (alertname, namespace) (ALERTS{alertstate="firing"})', "eval_time": f"{minute}m",
            "exp_samples": [{"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": 1}
                            for labels in expected]}


@pytest.mark.parametrize("adapter", [("pods",), ("deployments",)], indirect=True, ids=["pods", "deployments"])
async def test_a_refused_namespace_reads_as_discovery_failing_on_metrics_and_its_alert_names_it(
        adapter: tuple[Path, str], tmp_path: Path) -> None:
    """Before, /metrics had no per-namespace view of discovery: team-b showed only as its runtime's values
    unknown, and with its Deployments refused from the start its runtime never appeared, so nothing fired."""
    _, url = adapter
    await answered(lambda: (0, discovery_health(url)), lambda _, found: found == {SERVED: 1.0, REFUSED: 0.0})

    page = "".join(line + "\n" for line in http_get(url + "/metrics")[1].splitlines()
                   if DISCOVERY_HEALTHY in line)
    linted = subprocess.run([PROMTOOL, "check", "metrics"], input=page, capture_output=True, text=True,
                            timeout=60, check=False)
    assert linted.returncode == 0 and "HELP" in page, (page, linted.stdout + linted.stderr)

    held = await asyncio.to_thread(stored_for, url, 30)
    done = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": held, "promql_expr_test": [
        firing(5, []),  # a watch re-listing, an adapter starting: not yet
        firing(12, [{"alertname": "ModelMeshAutoscalerDiscoveryFailing", "namespace": REFUSED}])]}],
        "discovery_outage_test.yaml")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


QUOTED_503 = re.compile(r'503 "([^"]+)"')
"""A 503's words as an alert's description quotes them; a quote may end in "..." where it stops short."""


@pytest.mark.parametrize("adapter", [("pods",)], indirect=True, ids=["pods"])
async def test_the_alert_quotes_the_503_that_the_refused_namespaces_hpas_get(
        adapter: tuple[Path, str], tmp_path: Path) -> None:
    """An on-call matches the HPA's FailedGetExternalMetric event against the alert that fired. The alert said
    the HPAs get 503 "metric source down", the words of a Prometheus or exporter outage (docs/operations.md's 503
    list sends that one to the metric source), where the HPA's event says "pod discovery out of date": RBAC."""
    kubeconfig, url = adapter
    await answered(lambda: (0, discovery_health(url)), lambda _, found: found.get(REFUSED) == 0.0)
    code, said = desired(kubeconfig, REFUSED)
    assert code != 0 and "ServiceUnavailable" in str(said), said

    held = await asyncio.to_thread(stored_for, url, 30)
    [alert] = [alert for alert in alerts_sent(tmp_path, held, 12)
               if alert.labels["alertname"] == "ModelMeshAutoscalerDiscoveryFailing"]
    quoted = QUOTED_503.findall(alert.annotations["description"])
    assert quoted, f"the alert no longer quotes the 503: update this test: {alert.annotations['description']}"
    for words in quoted:
        assert " ".join(words.removesuffix("...").split()) in str(said), (words, said)
