"""A runtime's explanation and KEDA values at the paths users type: with a trailing slash (as kube-apiserver
answers its own paths, and as a browser or a copied URL often has it) the same document; at a path near one
(`/debug`, `/debug/`, a segment short) a 404 `Status` whose message names the path to ask."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from tests.api.builders import KEY, refresher_with, runtime_view

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]

DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
KEDA = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"


@pytest.fixture
async def client(aiohttp_client: ClientFactory) -> Client:
    refresher = refresher_with(runtime_view(KEY))
    return await aiohttp_client(build_api_app(refresher, refresher.metrics))


async def get(client: Client, path: str) -> tuple[int, Any]:
    async with client.get(path) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("path", [DEBUG, KEDA], ids=["debug", "keda"])
async def test_a_trailing_slash_answers_the_same_document(client: Client, path: str) -> None:
    status, plain = await get(client, path)
    assert status == 200
    slashed_status, slashed = await get(client, path + "/")
    assert (slashed_status, slashed) == (200, plain)


async def test_a_trailing_slash_on_an_unknown_runtime_is_its_404(client: Client) -> None:
    status, body = await get(client, f"/debug/runtimes/{KEY.namespace}/no-such-runtime/")
    assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert f"runtime {KEY.namespace}/no-such-runtime is not known" in body["message"]


@pytest.mark.parametrize("path", ["/debug", "/debug/", "/debug/runtimes", "/debug/runtimes/",
                                  f"/debug/runtimes/{KEY.namespace}", f"/debug/runtimes/{KEY.namespace}/",
                                  f"{DEBUG}/extra"])
async def test_a_path_near_the_explanation_names_it(client: Client, path: str) -> None:
    status, body = await get(client, path)
    assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert "/debug/runtimes/<namespace>/<deployment>" in body["message"], body["message"]


@pytest.mark.parametrize("path", ["/keda", "/keda/", "/keda/v1/namespaces/ml/runtimes"])
async def test_a_path_near_the_keda_values_names_them(client: Client, path: str) -> None:
    status, body = await get(client, path)
    assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert "/keda/v1/namespaces/<namespace>/runtimes/<deployment>" in body["message"], body["message"]
