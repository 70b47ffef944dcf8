"""`/healthz`, `/livez` and `/readyz` as k8s.io/apiserver serves them (`pkg/server/healthz`): `ok`, a listing of
each named check with `?verbose`, `?exclude=NAME` to leave one out, and each check at `PATH/NAME`. Operators
and tools written against kube-apiserver, metrics-server or prometheus-adapter ask for `/readyz?verbose` and
`/livez/ping`: the adapter answered a bare `ok` to the one and 404 to the other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from tests.api.builders import KEY, refresher_with, runtime_view

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
STALL_LIMIT_S = 300.0


async def serving(aiohttp_client: ClientFactory, *, ready: bool = True) -> Client:
    """The API as `serve` builds it (with its stall watch), after its first refresh or before it (`ready`)."""
    refresher = refresher_with(runtime_view(KEY), ready=ready)
    return await aiohttp_client(build_api_app(refresher, refresher.metrics, stalled_after_s=STALL_LIMIT_S))


async def text_answer(client: Client, path: str) -> tuple[int, str, str]:
    async with client.get(path) as response:
        return response.status, response.headers["Content-Type"], await response.text()


@pytest.mark.parametrize("path", ["/healthz/ping", "/livez/ping", "/readyz/ping", "/healthz/refresh",
                                  "/livez/refresh", "/readyz/refresh", "/readyz/values"])
async def test_each_check_answers_ok_at_its_own_path(aiohttp_client: ClientFactory, path: str) -> None:
    """k8s.io/apiserver serves every installed check at `PATH/NAME`; `/livez/ping` was a 404 here."""
    client = await serving(aiohttp_client)
    assert await text_answer(client, path) == (200, "text/plain; charset=utf-8", "ok")


@pytest.mark.parametrize(("path", "listing"), [
    ("/healthz", "[+]ping ok\n[+]refresh ok\nhealthz check passed\n"),
    ("/livez", "[+]ping ok\n[+]refresh ok\nlivez check passed\n"),
    ("/readyz", "[+]ping ok\n[+]values ok\n[+]refresh ok\nreadyz check passed\n"),
])
@pytest.mark.parametrize("verbose", ["verbose", "verbose=", "verbose=false", "verbose=1"])
async def test_verbose_lists_each_check_as_kube_apiserver_does(aiohttp_client: ClientFactory, path: str,
                                                               listing: str, verbose: str) -> None:
    """`?verbose` (any value: the key is what kube-apiserver looks for) lists each check, `[+]NAME ok`, then
    `NAME check passed`; it answered a bare `ok`."""
    client = await serving(aiohttp_client)
    assert await text_answer(client, f"{path}?{verbose}") == (200, "text/plain; charset=utf-8", listing)
    assert (await text_answer(client, path))[2] == "ok"


async def test_an_excluded_check_is_left_out_and_said_so(aiohttp_client: ClientFactory) -> None:
    """Before the first refresh `/readyz` fails on `values`; `?exclude=values` leaves it out, as kube-apiserver
    does, and the listing says it was excluded."""
    client = await serving(aiohttp_client, ready=False)
    status, _, body = await text_answer(client, "/readyz")
    assert status == 503 and "waiting for the first refresh" in body
    assert await text_answer(client, "/readyz?exclude=values&verbose") == (
        200, "text/plain; charset=utf-8", "[+]ping ok\n[+]values excluded: ok\n[+]refresh ok\nreadyz check passed\n")
    assert (await text_answer(client, "/readyz?exclude=values"))[::2] == (200, "ok")


async def test_a_check_that_is_not_installed_cannot_be_excluded_and_is_warned_of(
        aiohttp_client: ClientFactory) -> None:
    client = await serving(aiohttp_client)
    assert (await text_answer(client, "/livez?verbose&exclude=values&exclude=etcd"))[2] == (
        '[+]ping ok\n[+]refresh ok\nwarn: some health checks cannot be excluded: no matches for "etcd","values"\n'
        "livez check passed\n")


async def test_a_failing_check_fails_at_its_own_path_and_the_others_pass(aiohttp_client: ClientFactory) -> None:
    client = await serving(aiohttp_client, ready=False)
    status, _, body = await text_answer(client, "/readyz/values")
    assert status == 503 and "waiting for the first refresh" in body, body
    assert (await text_answer(client, "/readyz/ping"))[::2] == (200, "ok")
    assert (await text_answer(client, "/livez?verbose"))[::2] == (
        200, "[+]ping ok\n[+]refresh ok\nlivez check passed\n")


@pytest.mark.parametrize("path", ["/healthz/values", "/livez/nope", "/readyz/ping/more"])
async def test_a_check_a_path_does_not_have_is_not_found(aiohttp_client: ClientFactory, path: str) -> None:
    client = await serving(aiohttp_client)
    assert (await text_answer(client, path))[0] == 404
