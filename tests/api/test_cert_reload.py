"""A renewed serving certificate is served without a restart, the way a mounted Secret is renewed: the
kubelet writes the new files into a fresh directory and swaps the `..data` symlink. The reloader on its own,
and a real `serve` as the shipped Deployment runs it (serving workers, `--workers 1` by default)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID

from autoscaler.api.certs import server_context
from exporter.cert_reload import CertificateReloader
from tests.support.certificates import issue_cert
from tests.support.processes import free_port, poll, running


def write_secret_volume(volume: Path, leaf: trustme.LeafCert, version: str) -> None:
    """Lay out `tls.crt`/`tls.key` as the kubelet does for a Secret volume (atomic `..data` swap)."""
    data = volume / f"..{version}"
    data.mkdir()
    leaf.cert_chain_pems[0].write_to_path(str(data / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(data / "tls.key"))
    link = volume / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, volume / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(f"..data/{name}")


async def served_common_name(port: int, ca: trustme.CA) -> str:
    client = ssl.create_default_context()
    ca.configure_trust(client)
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
    try:
        certificate = writer.get_extra_info("peercert")
        return str(dict(pair[0] for pair in certificate["subject"])["commonName"])
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def served(tmp_path: Path, ca: trustme.CA) -> AsyncIterator[tuple[ssl.SSLContext, int]]:
    write_secret_volume(tmp_path, issue_cert(ca, "localhost", common_name="first"), "v1")
    context = server_context(tmp_path / "tls.crt", tmp_path / "tls.key")
    runner = web.AppRunner(web.Application())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    yield context, port
    await runner.cleanup()


async def test_a_renewed_certificate_is_served_to_new_connections(
    tmp_path: Path, ca: trustme.CA, served: tuple[ssl.SSLContext, int]
) -> None:
    context, port = served
    reloader = CertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key")
    assert await served_common_name(port, ca) == "first"
    assert not reloader.check()  # nothing changed: nothing loaded

    write_secret_volume(tmp_path, issue_cert(ca, "localhost", common_name="renewed"), "v2")

    assert reloader.check()
    assert await served_common_name(port, ca) == "renewed"
    assert reloader.reloads == 1


async def test_a_half_written_pair_keeps_the_old_certificate_until_it_loads(
    tmp_path: Path, ca: trustme.CA, served: tuple[ssl.SSLContext, int], caplog: pytest.LogCaptureFixture
) -> None:
    context, port = served
    reloader = CertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key")
    renewed = issue_cert(ca, "localhost", common_name="renewed")
    data = (tmp_path / "..data").resolve()
    renewed.cert_chain_pems[0].write_to_path(str(data / "tls.crt"))  # the key is not written yet

    assert not reloader.check()
    assert await served_common_name(port, ca) == "first"
    assert "does not load yet" in caplog.text

    renewed.private_key_pem.write_to_path(str(data / "tls.key"))
    assert reloader.check()
    assert await served_common_name(port, ca) == "renewed"


async def test_the_reloader_task_picks_up_a_renewal_by_itself(
    tmp_path: Path, ca: trustme.CA, served: tuple[ssl.SSLContext, int]
) -> None:
    context, port = served
    task = asyncio.create_task(CertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key",
                                                          interval_s=0.05).run())
    try:
        write_secret_volume(tmp_path, issue_cert(ca, "localhost", common_name="renewed"), "v2")
        async with asyncio.timeout(5):
            while await served_common_name(port, ca) != "renewed":
                await asyncio.sleep(0.05)
    finally:
        task.cancel()


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    """A client's TLS settings that verify against `ca`, made once per test: made for every connection, each
    read the system's CA bundle again (tens of ms of CPU, a hundred times while a renewal is awaited)."""
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return client


def common_name_served_at(port: int, client: ssl.SSLContext) -> str:
    """The common name of the certificate a new TLS connection to `port` is shown (it must verify with `client`,
    which resumes no session: each connection is a full handshake)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            client.wrap_socket(raw, server_hostname="localhost") as connection:
        der = connection.getpeercert(binary_form=True)
    assert der is not None
    return str(x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "processes"), [([], 1), (["--workers", "2"], 2)],
                         ids=["default-workers", "two-workers"])
def test_serve_presents_a_renewed_certificate_without_a_restart(
        tmp_path: Path, ca: trustme.CA, workers: list[str], processes: int) -> None:
    """cert-manager renews the Secret, the kubelet swaps its files: every new connection, whichever serving
    worker takes it, is shown the renewed certificate, and the log says it was reloaded."""
    volume = tmp_path / "serving-cert"
    volume.mkdir()
    write_secret_volume(volume, issue_cert(ca, "localhost", common_name="first"), "v1")
    targets = tmp_path / "targets.yaml"
    targets.write_text(yaml.safe_dump({"runtimes": [{
        "namespace": "default", "deployment": "modelmesh-serving-demo",
        "pods": [{"name": "pod-0", "url": f"http://127.0.0.1:{free_port()}/metrics"}]}]}))
    port = free_port()
    log = tmp_path / "adapter.log"
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--targets",
                  str(targets), "--tls-cert-file", str(volume / "tls.crt"), "--tls-private-key-file",
                  str(volume / "tls.key"), "--deletion-cost", "off", *workers],
                 f"https://127.0.0.1:{port}/healthz", log):
        client = trusting(ca)
        assert {common_name_served_at(port, client) for _ in range(10)} == {"first"}

        write_secret_volume(volume, issue_cert(ca, "localhost", common_name="renewed"), "v2")

        # the reloader looks every 10 s: a look a second finds it as surely as four
        poll(lambda: common_name_served_at(port, client) == "renewed", timeout=60, interval=1.0)
        # wait for every worker to say it reloaded, then ask them all again
        poll(lambda: log.read_text().count("serving certificate reloaded from") >= processes, timeout=60,
             interval=1.0)
        assert {common_name_served_at(port, client) for _ in range(20)} == {"renewed"}
