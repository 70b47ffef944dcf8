"""The adapter scrapes exporters that serve HTTPS and ask for client certificates, as discovered in Kubernetes:
`--exporter-scheme https`, the exporters' CA (`--exporter-ca-file`), the name their certificates carry
(`--exporter-server-name`, Prometheus's `tls_config.server_name`: a pod's IP is in no certificate cert-manager
issues) and a client certificate (`--exporter-client-cert-file`/`--exporter-client-key-file`), read again when
the kubelet swaps its Secret. Real exporter processes on the pods' IPs, the real adapter, the fake Kubernetes
API, values read with kubectl."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.api.test_cert_reload import write_secret_volume
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.api_peek import peek_raw
from tests.support.certificates import issue_cert
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, poll, running

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
POD, POD_IP = "triton-0", "127.0.0.2"
SERVER_NAME = "modelmesh-exporter"
LOAD = ("/apis/external.metrics.k8s.io/v1beta1/namespaces/modelmesh-serving/modelmesh_request_load"
        "?labelSelector=servingruntime%3Dtriton")


@dataclass(frozen=True)
class Pki:
    """The exporters' CA (serving and client certificates alike, as one cert-manager Issuer makes them), and
    the files the exporter and the adapter are given."""

    authority: trustme.CA
    directory: Path

    @classmethod
    def made_in(cls, directory: Path) -> Pki:
        """A new CA, its certificate written where `ca_file` says."""
        made = cls(trustme.CA(), directory)
        made.authority.cert_pem.write_to_path(str(made.ca_file))
        return made

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def exporter_env(self) -> dict[str, str]:
        """The exporter's TLS variables: a certificate for `SERVER_NAME` alone, not the pod's IP."""
        serving = self.directory / "exporter"
        serving.mkdir(exist_ok=True)
        write_secret_volume(serving, issue_cert(self.authority, SERVER_NAME), "v1")
        return {"EXPORTER_TLS_CERT_FILE": str(serving / "tls.crt"), "EXPORTER_TLS_KEY_FILE": str(serving / "tls.key"),
                "EXPORTER_TLS_CLIENT_CA_FILE": str(self.ca_file)}


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.made_in(tmp_path)


def client_secret(directory: Path, authority: trustme.CA, version: str) -> Path:
    """The adapter's client-certificate Secret volume, `authority`'s certificate swapped in as the kubelet does."""
    directory.mkdir(exist_ok=True)
    write_secret_volume(directory, issue_cert(authority, "modelmesh-autoscaler"), version)
    return directory


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, pki: Pki, adapter_flags: list[str]) -> AsyncIterator[Said]:
    """One runtime of one pod whose exporter serves HTTPS with client certificates, and the adapter; yields a
    reader of the adapter's log."""
    exporter_port, adapter_port = free_port(), free_port()
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR)
        with contextlib.ExitStack() as stack:
            runner: web.AppRunner | None = None
            try:
                runner = await start_pod(stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=50)),
                                         namespace=NS, name=POD, ip=POD_IP, labels=SELECTOR,
                                         exporter_port=exporter_port, logs=tmp_path, exporter_env=pki.exporter_env())
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--exporter-port", str(exporter_port), "--refresh-interval", "1", "--window", "3",
                     "--leader-elect", "false", "--exporter-scheme", "https", "--exporter-ca-file",
                     str(pki.ca_file), *adapter_flags],
                    f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
                kubeconfig = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")
                yield Said(kubeconfig, tmp_path / "adapter.log")
            finally:
                if runner is not None:
                    await runner.cleanup()


def served_load(kubeconfig: Path, *, peek: bool = False) -> str:
    """`load=VALUE` where the adapter serves the runtime's request load, else what it answered (as kubectl reads it;
    `peek`: as the test process reads it, for waiting: `api_peek`)."""
    code, body = (peek_raw if peek else get_raw)(kubeconfig, LOAD)
    return f"load={body['items'][0]['value']}" if code == 0 and body.get("items") else f"no load: {code} {body}"


@dataclass(frozen=True)
class Said:
    """What the operator sees: the request load kubectl reads, and the adapter's log after it."""

    kubeconfig: Path
    log: Path

    def __call__(self, *, peek: bool = False) -> str:
        return served_load(self.kubeconfig, peek=peek) + "\n" + self.log.read_text()


def once(said: Said, condition: Callable[[str], bool]) -> str:
    """What `said` says once `condition` holds of it: awaited reading the load without kubectl, then read with
    kubectl until it holds again (at once, unless it changed back)."""

    def check(peek: bool) -> str | None:
        text = said(peek=peek)
        return text if condition(text) else None

    poll(lambda: check(peek=True), 60)
    return poll(lambda: check(peek=False), 60)


def client_flags(secret: Path) -> list[str]:
    return ["--exporter-client-cert-file", str(secret / "tls.crt"), "--exporter-client-key-file",
            str(secret / "tls.key")]


async def test_exporters_over_https_with_client_certificates_are_scraped(tmp_path: Path, pki: Pki) -> None:
    secret = client_secret(tmp_path / "client", pki.authority, "v1")
    async with cluster(tmp_path, pki, ["--exporter-server-name", SERVER_NAME, *client_flags(secret)]) as said:
        await asyncio.to_thread(once, said, lambda text: text.startswith("load="))


async def test_a_certificate_without_the_pods_ip_names_the_server_name_flag(tmp_path: Path, pki: Pki) -> None:
    secret = client_secret(tmp_path / "client", pki.authority, "v1")
    async with cluster(tmp_path, pki, client_flags(secret)) as said:
        log = await asyncio.to_thread(once, said, lambda text: "failed (tls)" in text)
    assert "certificate verify failed" in log and "--exporter-server-name" in log, log


async def test_a_renewed_client_certificate_is_presented_without_a_restart(tmp_path: Path, pki: Pki) -> None:
    secret = client_secret(tmp_path / "client", trustme.CA(), "v1")  # not the exporters' CA: refused
    async with cluster(tmp_path, pki, ["--exporter-server-name", SERVER_NAME, *client_flags(secret)]) as said:
        refused = await asyncio.to_thread(once, said, lambda text: f"{POD} failed" in text)
        assert "--exporter-client-cert-file" in refused.partition(f"{POD} failed")[2], refused
        write_secret_volume(secret, issue_cert(pki.authority, "modelmesh-autoscaler"), "v2")
        log = await asyncio.to_thread(once, said, lambda text: text.startswith("load="))
    assert f"client certificate reloaded from {secret / 'tls.crt'}" in log, log
