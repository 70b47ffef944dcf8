"""At `--max-connections`, one client address that opens many times the bound cannot keep another address out.

A client that is served (a valid token, 200s) but opens many more connections than the bound, reconnecting at
once whenever one is closed, filled the line of new connections waiting for a place as fast as places freed:
every other client's new connection was refused as it was accepted (the line full) or waited behind it, so
KEDA, or the aggregator at its own address, competed arrival for arrival with it. Each address now has a share
of the places (`connection_room.ConnectionGuard.make_room`): a new connection from an address under its share goes
ahead of those of an address over it.

The greedy client runs in a process of its own from 127.0.0.1, over real TLS sockets, as another pod would; the
other client connects from 127.0.0.2 (Linux routes all of 127/8 to the loopback interface).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest

from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi
from tests.api.looping_clients import KEDA_PATH, PLACES, keda_api, looping_client
from tests.fakes.kube import FakeKubeApi

GREEDY_CONNECTIONS = 4 * PLACES
OTHER_ADDRESS = "127.0.0.2"

GREEDY = r"""
def loop():
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.1", 0)) as raw, \
                    context.wrap_socket(raw) as tls:
                stream = tls.makefile("rb")
                while True:
                    tls.sendall(request)
                    assert answer(stream) == 200
                    answered.release()
        except OSError:
            pass  # closed or refused: again at once

for _ in range(connections):
    threading.Thread(target=loop, daemon=True).start()
for _ in range(4 * connections):
    answered.acquire()  # served, and at the bound
print("ready", flush=True)
sys.stdin.read()
"""
"""`looping_client`'s script: served requests on every connection, many more connections than places."""


@pytest.fixture
async def api(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    async with keda_api(pki, kube, settings_for) as secured:
        yield secured


@asynccontextmanager
async def greedy_client(api: SecuredApi) -> AsyncIterator[None]:
    """Another process at 127.0.0.1 keeping `GREEDY_CONNECTIONS` connections busy with served requests."""
    async with looping_client(GREEDY, api, GREEDY_CONNECTIONS, "keda-token", 1,
                              lambda: api.guard.open == PLACES and len(api.guard.promised) > 0):
        yield


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
