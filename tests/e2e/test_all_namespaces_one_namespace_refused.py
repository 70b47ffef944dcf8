"""Without `--namespaces`, a policy-file runtime whose Deployment read is refused names its namespace, not the cluster.

`serve --config FILE` (every namespace discovered) with FILE naming a runtime in team-b: discovery reads that
Deployment by name in team-b, and the API server refuses it (a RoleBinding-only grant there, the namespace being
deleted, a 500 for it alone). Only team-b's runtime is held, yet `modelmesh_autoscaler_discovery_healthy` had
one series, `namespace="*"`, and it went to 0: the alert ModelMeshAutoscalerDiscoveryFailing said "cannot discover
runtimes in the cluster" and the whole fleet looked unhealthy while its watches of all namespaces worked. Now team-b
has its own series at 0, `*` stays 1, and the alert names team-b.

The real `serve` over the fake Kubernetes API; its /metrics scraped, its /debug read with kubectl, the alert
evaluated by promtool on the series as Prometheus stores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_namespace_discovery_outage import answered, debug, discovery_health, firing, stored_for
from tests.fakes.kube import FakeKubeApi
from tests.manifests.support import promtool_test_rules
from tests.support.kubectl import write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

DISCOVERED, REFUSED = "team-a", "team-b"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}


@pytest.fixture(params=["forbidden", "server error"])
async def adapter(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Path, str]]:
    """`serve --config FILE` in all namespaces, FILE naming team-b's runtime, whose Deployment read is refused
    (RBAC's 403) or fails (500) for good; team-a's runtime is discovered. kubectl's kubeconfig and the URL."""
    port = free_port()
    config = tmp_path / "policy.yaml"
    config.write_text(f"runtimes:\n  - {{namespace: {REFUSED}, deployment: {DEPLOYMENT}}}\n")
    async with FakeKubeApi() as kube:
        for namespace in (DISCOVERED, REFUSED):
            kube.add_deployment(namespace, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR)
        if request.param == "forbidden":
            kube.forbid("get", "deployments", REFUSED)
        else:
            kube.fail(f"/namespaces/{REFUSED}/deployments/", 500, times=None, method="GET")
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{port}",
                 "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                 "--config", str(config), "--refresh-interval", "1", "--leader-elect", "false",
                 "--deletion-cost", "off", "--bridge", "off"],
                f"https://127.0.0.1:{port}/healthz", tmp_path / "adapter.log"))
            url = f"https://127.0.0.1:{port}"
            yield write_kubeconfig(tmp_path / "adapter.kubeconfig", url), url


async def test_the_refused_namespace_has_its_own_series_and_the_cluster_stays_healthy(
        adapter: tuple[Path, str], tmp_path: Path) -> None:
    kubeconfig, url = adapter
    await answered(lambda: (0, discovery_health(url)), lambda _, found: found == {"*": 1.0, REFUSED: 0.0})

    # /debug says where: team-b's runtime quotes its read's error, team-a's (discovered, served) nothing of it.
    theirs = await asyncio.to_thread(debug, kubeconfig, REFUSED)
    [problem] = [p for p in theirs["source"]["problems"] if p["reason"] == "discovery"]
    assert f"read Deployment {REFUSED}/{DEPLOYMENT}" in json.dumps(problem), problem
    mine = await asyncio.to_thread(debug, kubeconfig, DISCOVERED)
    assert [p for p in mine["source"]["problems"] if p["reason"] == "discovery"] == [], mine["source"]

    # The shipped alert names team-b, not the cluster.
    held = await asyncio.to_thread(stored_for, url, 30)
    done = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": held, "promql_expr_test": [
        firing(5, []),
        firing(12, [{"alertname": "ModelMeshAutoscalerDiscoveryFailing", "namespace": REFUSED}])]}],
        "discovery_one_namespace_test.yaml")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
