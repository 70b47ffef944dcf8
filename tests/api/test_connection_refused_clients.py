"""At `--max-connections`, a client refused for who it is or how fast it asks (401, 403, 429) cannot keep the
places from clients the adapter serves.

The security review's case: an attacker opens every place with a bad bearer token and loops on the instant
401s, reconnecting at once whenever a connection is closed. Before, a connection's place went to whichever
connection had waited longest for request headers, so the attacker's connections (back in line after every
instant answer) pushed the good client's new connection, still in its TLS handshake, to the front, and the
attacker's next reconnect evicted it: KEDA's or the aggregator's request failed with a reset connection.

The attacker runs in a process of its own, over real TLS sockets, as another pod would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from autoscaler.api.connections import ConnectionLimits
from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi
from tests.api.looping_clients import KEDA_PATH, PLACES, keda_api, looping_client
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

ATTACKER = r"""
def loop():
    first = True
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw) as tls:
                stream = tls.makefile("rb")
                while True:
                    tls.sendall(request)
                    statuses = {answer(stream) for _ in range(depth)}
                    assert statuses <= {401, 403, 429}, statuses
                    if first:
                        first = False
                        answered.release()
        except OSError:
            pass  # closed or refused: again at once, as an attacker would

for _ in range(connections):
    threading.Thread(target=loop, daemon=True).start()
    answered.acquire()  # one place after the other: every place is the attacker's
print("ready", flush=True)
sys.stdin.read()
"""
"""`looping_client`'s script: every place held with an instant 4xx answer, one place after the other."""


@pytest.fixture
async def rig(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    async with keda_api(pki, kube, settings_for) as api:
        yield api


@asynccontextmanager
async def attacker(rig: SecuredApi, *, token: str = "not-a-token", depth: int = 1) -> AsyncIterator[None]:
    """Another process holding every place with `token`, `depth` requests pipelined at a time, in a loop."""
    async with looping_client(ATTACKER, rig, PLACES, token, depth, lambda: rig.guard.open == PLACES):
        yield


@pytest.mark.parametrize("depth", [1, 8], ids=["one-at-a-time", "pipelined"])
async def test_a_client_looping_on_401s_in_every_place_cannot_lock_keda_out(rig: SecuredApi, depth: int) -> None:
    async with attacker(rig, depth=depth):
        for _ in range(5):  # KEDA's polls, each on a new connection (its pooled one was closed meanwhile)
            # Each poll meets every place the attacker's: on a loaded machine its reconnects can lag a poll.
            await eventually(lambda: rig.guard.open == PLACES)
            status, body = await rig.get(KEDA_PATH, token="keda-token")
            assert status == 200, body
            assert body["modelmesh_desired_replicas"] >= 0
    guard = rig.guard
    assert guard.evicted + guard.closed_after_answer >= 5  # each poll found every place the attacker's


HELD_S = 4.0
"""How long the fake Kubernetes API holds the SubjectAccessReview of a request kept in flight: longer than a new
connection takes to arrive, however loaded the machine."""


async def answer_on(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 answer read whole, by its Content-Length: (status, body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    lines = head.decode().split("\r\n")
    length = next(int(line.partition(":")[2]) for line in lines if line.lower().startswith("content-length:"))
    return int(lines[0].split()[1]), await asyncio.wait_for(reader.readexactly(length), 30)


def request(path: str, token: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: adapter\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


@pytest.fixture
async def one_place(pki: Pki, kube: FakeKubeApi,
                    settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    kube.tokens["denied-token"] = ("system:serviceaccount:tenant:nosy", [])  # no grant: 403
    limits = ConnectionLimits(max_connections=1, header_read_timeout_s=30, keepalive_timeout_s=60)
    async with keda_api(pki, kube, settings_for, limits) as api:
        yield api


async def test_a_refused_clients_request_in_flight_is_answered_in_full_before_its_connection_makes_room(
        one_place: SecuredApi) -> None:
    """The only place is a connection whose last answer was a 403 and that now waits for a slow
    authorization: a new client takes its place only once that answer is written, whole."""
    rig = one_place
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.port, ssl=rig.context(None))
    writer.write(request(KEDA_PATH, "denied-token"))
    assert (await answer_on(reader))[0] == 403
    held = rig.kube.delay("subjectaccessreviews", HELD_S, times=1)
    writer.write(request(KEDA_PATH, "keda-token"))
    await eventually(lambda: held.hits == 1)  # in flight

    newcomer = asyncio.create_task(rig.get(KEDA_PATH, token="keda-token"))
    await eventually(lambda: rig.guard.closed_after_answer == 1 and len(rig.guard.promised) == 1)
    assert held.hits == 1 and not reader.at_eof()  # still in flight: nothing closed it

    status, body = await answer_on(reader)
    assert status == 200 and json.loads(body)["modelmesh_desired_replicas"] >= 0  # whole, by its length
    assert await asyncio.wait_for(reader.read(), 30) == b""  # then closed, its place the newcomer's
    assert (await newcomer)[0] == 200
    writer.close()


async def test_a_request_in_flight_is_never_cut_off_and_a_new_client_waits_for_its_place(one_place: SecuredApi) -> None:
    """Every place busy with a served client's request: before, a new connection was refused at once. It waits,
    before its TLS handshake, until that answer is written; then the idle connection makes room."""
    rig = one_place
    held = rig.kube.delay("subjectaccessreviews", HELD_S, times=1)
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.port, ssl=rig.context(None))
    writer.write(request(KEDA_PATH, "keda-token"))
    await eventually(lambda: held.hits == 1)

    newcomer = asyncio.create_task(rig.get(KEDA_PATH, token="keda-token"))
    await eventually(lambda: len(rig.guard.promised) == 1)
    assert rig.guard.closed_after_answer == rig.guard.evicted == 0 and not reader.at_eof()

    status, body = await answer_on(reader)
    assert status == 200 and json.loads(body)["modelmesh_desired_replicas"] >= 0
    assert (await newcomer)[0] == 200
    assert await asyncio.wait_for(reader.read(), 30) == b""  # the idle one made room, after its answer
    writer.close()
