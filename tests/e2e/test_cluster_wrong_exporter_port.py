"""An adapter started with the wrong `--exporter-port`: what the HPA's condition, read through kubectl, and the
log say. The adapter knows its source (scrape) and how the scrapes fail (`connect`); the 503 said neither: it was
~900 characters whose first check was the exporter sidecar's --modelmesh-url (EXPORTER_MODELMESH_URL), then what a
Prometheus PodMonitor may drop, and the runtime's log line said `no request load` for each pod. Real exporters on
the pods' IPs, the real adapter in its default scrape mode, the fake Kubernetes API, kubectl.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.e2e.test_cluster_exporter_tls import DEPLOYMENT, NS, SELECTOR
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, poll, running

pytestmark = pytest.mark.slow

LOAD = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_request_load"
        f"?labelSelector=deployment%3D{DEPLOYMENT}")


async def test_a_wrong_exporter_port_is_said_as_the_scrape_failure_it_is(tmp_path: Path) -> None:
    exporter_port, wrong_port, adapter_port = free_port(), free_port(), free_port()
    log = tmp_path / "adapter.log"
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=2, labels=SELECTOR, selector=SELECTOR)
        with contextlib.ExitStack() as stack:
            runners: list[web.AppRunner] = []
            try:
                for index in range(2):
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=50)), namespace=NS,
                        name=f"triton-{index}", ip=f"127.0.0.{index + 2}", labels=SELECTOR,
                        exporter_port=exporter_port, logs=tmp_path))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--exporter-port", str(wrong_port), "--refresh-interval", "1", "--window", "3",
                     "--leader-elect", "false"],
                    f"https://127.0.0.1:{adapter_port}/healthz", log))
                kubeconfig = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")

                def not_served() -> str | None:
                    code, said = get_raw(kubeconfig, LOAD)
                    return str(said) if code != 0 and "not served" in str(said) else None

                message = await asyncio.to_thread(poll, not_served, 30)
            finally:
                for runner in runners:
                    await runner.cleanup()
    cause = message.partition("is not served: ")[2]
    assert cause.startswith("the scrape source"), message
    assert "connect" in cause and f"port {wrong_port}" in cause and "--exporter-port" in cause, message
    assert "modelmesh-url" not in message and "Prometheus" not in message and "PodMonitor" not in message, message
    assert len(message.partition("(ServiceUnavailable): ")[2]) < 600, message  # it was 900
    # `kubectl describe hpa` readers act on pods, not on their IPs or URLs (it said triton-0: http://127.0.0.2:...)
    assert "127.0.0." not in message and "http://" not in message, message
    assert any(f"triton-{index}: [Errno 111] Connect call failed; nothing accepts" in message for index in range(2)), \
        message
    runtime_lines = [line for line in log.read_text().splitlines()
                     if "autoscaler.refresher" in line and f"{NS}/{DEPLOYMENT}:" in line and "fresh" in line]
    assert runtime_lines, log.read_text()[-3000:]
    assert "no request load" not in runtime_lines[0] and "scrape failed (connect)" in runtime_lines[0], runtime_lines
