"""A runtime half way through its roll to HTTPS on the exporters' port is served from both halves: the adapter,
left at its default `--exporter-scheme`, scrapes each pod over the scheme its exporter port's name says (the TLS
patch's `https-exporter` over https, the plain patch's `exporter` over http), so a migration patches runtime by
runtime, pod by pod, with no runtime's scrapes failing in between. Real exporters on the pods' IPs, the real
adapter, the fake Kubernetes API, read with kubectl."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.e2e.test_cluster_exporter_tls import (
    DEPLOYMENT,
    NS,
    SELECTOR,
    SERVER_NAME,
    Pki,
    client_flags,
    client_secret,
    served_load,
)
from tests.fakes.kube import FakeKubeApi
from tests.support.api_peek import peek_raw
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, poll, running

pytestmark = pytest.mark.slow

PODS = {"triton-tls": ("127.0.0.2", "https-exporter"), "triton-plain": ("127.0.0.3", "exporter")}
"""Each pod: its IP and the name its exporter port is declared under (the TLS patch's, the plain patch's)."""


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.made_in(tmp_path)


def debug(kubeconfig: Path, *, peek: bool = False) -> dict[str, Any]:
    """/debug as kubectl reads it; `peek`: as the test process reads it, for waiting (`api_peek`)."""
    code, document = (peek_raw if peek else get_raw)(kubeconfig, f"/debug/runtimes/{NS}/{DEPLOYMENT}")
    return dict(document) if code == 0 else {"error": document}


def problems_once_shown(kubeconfig: Path) -> list[dict[str, Any]]:
    """/debug's `source.problems` as kubectl reads them, once there are some."""
    def shown(peek: bool) -> list[dict[str, Any]] | None:
        problems: list[dict[str, Any]] | None = debug(kubeconfig, peek=peek).get("source", {}).get("problems")
        return problems
    poll(lambda: shown(peek=True), 30)
    return poll(lambda: shown(peek=False), 30)


@contextlib.asynccontextmanager
async def half_rolled_runtime(tmp_path: Path, pki: Pki, *adapter_flags: str,
                              tls_served: bool = True) -> AsyncIterator[Path]:
    """The runtime's two pods, one of each sidecar patch, and the adapter given the exporters' TLS settings and
    `adapter_flags`; yields the kubeconfig that reads the adapter. `tls_served` False: the pod whose port the TLS
    patch named serves plain http, as a sidecar from before 5 December 2026 does (it ignores the TLS variables)."""
    exporter_port, adapter_port = free_port(), free_port()
    secret = client_secret(tmp_path / "client", pki.authority, "v1")
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=2, labels=SELECTOR, selector=SELECTOR)
        with contextlib.ExitStack() as stack:
            runners: list[web.AppRunner] = []
            try:
                for name, (ip, port_name) in PODS.items():
                    env = pki.exporter_env() if port_name.startswith("https") and tls_served else None
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=50)), namespace=NS, name=name,
                        ip=ip, labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path, exporter_env=env,
                        ports=[(port_name, exporter_port)]))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--exporter-port", str(exporter_port), "--refresh-interval", "1", "--window", "3",
                     "--leader-elect", "false", "--exporter-ca-file", str(pki.ca_file),
                     "--exporter-server-name", SERVER_NAME, *client_flags(secret), *adapter_flags],
                    f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
                yield write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")
            finally:
                for runner in runners:
                    await runner.cleanup()


async def test_a_runtime_rolling_to_https_is_scraped_pod_by_pod_over_each_ports_scheme(
        tmp_path: Path, pki: Pki) -> None:
    async with half_rolled_runtime(tmp_path, pki) as kubeconfig:  # no --exporter-scheme: the default

        def both_fresh(peek: bool = False) -> dict[str, Any] | None:
            document = debug(kubeconfig, peek=peek)
            fresh = {pod["name"]: pod["fresh"] for pod in document.get("pods", ())}
            return document if fresh == dict.fromkeys(PODS, True) else None

        try:
            await asyncio.to_thread(poll, lambda: both_fresh(peek=True), 60)
            document = await asyncio.to_thread(poll, both_fresh, 60)
        except AssertionError:
            shown = debug(kubeconfig)
            pytest.fail(f"not both pods fresh: {shown.get('pods')}\nsource: {shown.get('source')}\n"
                        f"{(tmp_path / 'adapter.log').read_text()[-3000:]}")
        load = await asyncio.to_thread(served_load, kubeconfig)
    assert document["source"]["problems"] == [], document["source"]
    assert load.startswith("load="), load


async def test_a_forced_scheme_names_the_pods_whose_port_says_otherwise_and_what_to_write(
        tmp_path: Path, pki: Pki) -> None:
    """`--exporter-scheme https` given while sidecars move to TLS: the pod not rolled yet fails its scrapes, and
    the log says why, which pod, and what to write."""
    log = tmp_path / "adapter.log"
    async with half_rolled_runtime(tmp_path, pki, "--exporter-scheme", "https") as kubeconfig:
        said = await asyncio.to_thread(poll, lambda: [line for line in log.read_text().splitlines()
                                                      if "--exporter-scheme https" in line
                                                      and "autoscaler.sources.forced_scheme" in line], 30)
        problems = await asyncio.to_thread(problems_once_shown, kubeconfig)
    assert len(said) == 1 and f"{NS}/triton-plain" in said[0] and "triton-tls" not in said[0], said
    assert "Leave --exporter-scheme at auto" in said[0], said
    assert [problem["pod"] for problem in problems] == ["triton-plain"], problems


async def test_a_plain_sidecar_on_the_tls_patchs_port_is_said_to_be_perhaps_too_old_for_tls(
        tmp_path: Path, pki: Pki) -> None:
    """The TLS patch applied to a sidecar of an older image (steps out of order in an upgrade, or a sidecar rolled
    back first): it logs `EXPORTER_TLS_CERT_FILE is not a setting; ignored` and serves plain http on the port
    named `https-exporter`. The adapter's reason said only "give the exporter its certificate", which it was
    given; it names the other cause, the sidecar's image, and what its log says."""
    async with half_rolled_runtime(tmp_path, pki, tls_served=False) as kubeconfig:
        problems = await asyncio.to_thread(problems_once_shown, kubeconfig)
    assert [problem["pod"] for problem in problems] == ["triton-tls"], problems
    said = str(problems[0])
    assert "nothing speaks TLS there" in said, problems
    assert "older than 5 December 2026" in said and "EXPORTER_TLS_CERT_FILE is not a setting; ignored" in said, said
    assert (tmp_path / "adapter.log").read_text().count("older than 5 December 2026") >= 1
