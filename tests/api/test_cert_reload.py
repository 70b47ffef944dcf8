"""A renewed serving certificate is served without a restart, the way a mounted Secret is renewed: the
kubelet writes the new files into a fresh directory and swaps the `..data` symlink."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from autoscaler.api.cert_reload import ServingCertificateReloader
from autoscaler.api.certs import server_context
from tests.support.processes import free_port


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
    write_secret_volume(tmp_path, ca.issue_cert("localhost", common_name="first"), "v1")
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
    reloader = ServingCertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key")
    assert await served_common_name(port, ca) == "first"
    assert not reloader.check()  # nothing changed: nothing loaded

    write_secret_volume(tmp_path, ca.issue_cert("localhost", common_name="renewed"), "v2")

    assert reloader.check()
    assert await served_common_name(port, ca) == "renewed"
    assert reloader.reloads == 1


async def test_a_half_written_pair_keeps_the_old_certificate_until_it_loads(
    tmp_path: Path, ca: trustme.CA, served: tuple[ssl.SSLContext, int], caplog: pytest.LogCaptureFixture
) -> None:
    context, port = served
    reloader = ServingCertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key")
    renewed = ca.issue_cert("localhost", common_name="renewed")
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
    task = asyncio.create_task(ServingCertificateReloader(context, tmp_path / "tls.crt", tmp_path / "tls.key",
                                                          interval_s=0.05).run())
    try:
        write_secret_volume(tmp_path, ca.issue_cert("localhost", common_name="renewed"), "v2")
        async with asyncio.timeout(5):
            while await served_common_name(port, ca) != "renewed":
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
