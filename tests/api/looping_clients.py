"""Clients in a process of their own, over real TLS sockets as another pod would, that hold the adapter's
connection places in a loop and reconnect at once whenever one is closed; and the API they hold them against
(`--max-connections` 4, a KEDA token it serves). For the tests of who makes room at the bound
(`test_connection_refused_clients`: refused clients; `test_connection_peer_share`: a served, greedy one)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from autoscaler.api.connections import ConnectionLimits
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

KEDA_PATH = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"
KEDA_USER = "system:serviceaccount:keda:keda-operator"
PLACES = 4

CLIENT_HEAD = r"""
import socket, ssl, sys, threading
port, connections, token, path, depth = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
request = f"GET {path} HTTP/1.1\r\nHost: adapter\r\nAuthorization: Bearer {token}\r\n\r\n".encode() * depth
answered = threading.Semaphore(0)

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
"""
"""What every looping client's script starts with: its arguments (port, connections, token, path, requests
pipelined at a time), a TLS context that trusts anything, the request, a semaphore for answers, and `answer`,
which reads one HTTP/1.1 answer whole and gives its status. The script goes on with its loop, prints "ready"
and waits on stdin."""


PLACES_LIMITS = ConnectionLimits(max_connections=PLACES, header_read_timeout_s=10, keepalive_timeout_s=60)


@asynccontextmanager
async def keda_api(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings],
                   limits: ConnectionLimits = PLACES_LIMITS) -> AsyncIterator[SecuredApi]:
    """The secured API at `limits` (`PLACES` connections), serving KEDA's token."""
    kube.tokens["keda-token"] = (KEDA_USER, [])
    kube.allow(user=KEDA_USER, resource="runtimes")
    async with secured_api(pki, kube, settings_for(), kube_timeout_s=30.0, limits=limits) as api:
        yield api


@asynccontextmanager
async def looping_client(script: str, api: SecuredApi, connections: int, token: str, depth: int,
                         settled: Callable[[], bool]) -> AsyncIterator[None]:
    """`CLIENT_HEAD` + `script` running against `api` until the block ends, once it says "ready" and `settled()`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT_HEAD + script, str(api.port), str(connections), token, KEDA_PATH, str(depth),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdin is not None
    try:
        assert await asyncio.wait_for(process.stdout.readline(), 60) == b"ready\n"
        await eventually(settled)
        yield
    finally:
        process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
