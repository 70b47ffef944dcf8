"""At `--max-connections`, one client address that opens many times the bound cannot keep another address out.

A client that is served (a valid token, 200s) but opens many more connections than the bound, reconnecting at
once whenever one is closed, filled the line of new connections waiting for a place as fast as places freed:
every other client's new connection was refused as it was accepted (the line full) or waited behind it, so
KEDA, or the aggregator at its own address, competed arrival for arrival with it. Each address now has a share
of the places (`connections.ConnectionGuard.make_room`): a new connection from an address under its share goes
ahead of those of an address over it.

The greedy client runs in a process of its own from 127.0.0.1, over real TLS sockets, as another pod would; the
other client connects from 127.0.0.2 (Linux routes all of 127/8 to the loopback interface).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest

from autoscaler.api.connections import ConnectionLimits
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

KEDA_PATH = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"
KEDA_USER = "system:serviceaccount:keda:keda-operator"
PLACES = 4
GREEDY_CONNECTIONS = 4 * PLACES
OTHER_ADDRESS = "127.0.0.2"

GREEDY = r"""
import socket, ssl, sys, threading
port, connections, token, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
request = f"GET {path} HTTP/1.1\r\nHost: adapter\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
served = threading.Semaphore(0)

def answer(stream):
    status = stream.readline()
    if not status:
        raise ConnectionError("closed")
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    stream.read(length)
    return int(status.split()[1])

def loop():
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.1", 0)) as raw, \
                    context.wrap_socket(raw) as tls:
                stream = tls.makefile("rb")
                while True:
                    tls.sendall(request)
                    assert answer(stream) == 200
                    served.release()
        except OSError:
            pass  # closed or refused: again at once

for _ in range(connections):
    threading.Thread(target=loop, daemon=True).start()
for _ in range(4 * connections):
    served.acquire()  # served, and at the bound
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
async def api(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    kube.tokens["keda-token"] = (KEDA_USER, [])
    kube.allow(user=KEDA_USER, resource="runtimes")
    limits = ConnectionLimits(max_connections=PLACES, header_read_timeout_s=10, keepalive_timeout_s=60)
    async with secured_api(pki, kube, settings_for(), kube_timeout_s=30.0, limits=limits) as secured:
        yield secured


@asynccontextmanager
async def greedy_client(api: SecuredApi) -> AsyncIterator[None]:
    """Another process at 127.0.0.1 keeping `GREEDY_CONNECTIONS` connections busy with served requests."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", GREEDY, str(api.port), str(GREEDY_CONNECTIONS), "keda-token", KEDA_PATH,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdin is not None
    try:
        assert await asyncio.wait_for(process.stdout.readline(), 60) == b"ready\n"
        await eventually(lambda: api.guard.open == PLACES and len(api.guard.promised) > 0)
        yield
    finally:
        process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def test_an_address_holding_many_times_the_bound_cannot_keep_another_address_out(api: SecuredApi) -> None:
    failures: list[str] = []
    async with greedy_client(api):
        for _ in range(5):  # KEDA's polls, each on a new connection (its pooled one was closed meanwhile)
            try:
                status, body = await api.get(KEDA_PATH, token="keda-token", local_address=OTHER_ADDRESS)
            except aiohttp.ClientError as error:  # refused as accepted: reset, or closed before an answer
                failures.append(repr(error))
                continue
            assert status == 200, body
            assert body["modelmesh_desired_replicas"] >= 0
    assert not failures, (len(failures), failures)
