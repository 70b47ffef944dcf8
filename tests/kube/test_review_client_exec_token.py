"""The serving workers' review client (TokenReview, SubjectAccessReview) with a kubeconfig user's exec plugin: its
own aiohttp session did not carry the trace by which a 401 runs the plugin again, so a token revoked before its
expiry was never fetched again there, and every HPA metrics read was answered 401 until five minutes before that
expiry; closing it left a plugin run under way running."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from autoscaler.kube.config import load_kube_settings
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.kube.reviews import KubeAuthApi
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin
from tests.kube.exec_token_fixtures import kube, token_plugin
from tests.support.waiting import eventually

__all__ = ["kube"]  # the fixture, taken from its module: the fake API taking token-1 alone

HOUR = 3600.0


@pytest.fixture
def plugin(tmp_path: Path) -> CertificatePlugin:
    return token_plugin(tmp_path, HOUR)


async def review_client(kube: FakeKubeApi, plugin: CertificatePlugin) -> KubeAuthApi:
    path = plugin.kubeconfig(kube, "ml")
    connection = ReviewConnection.of(await load_kube_settings(path), path)
    assert connection.from_plugin
    return await KubeAuthApi.connect(connection, timeout_s=5.0)


async def status_of(api: KubeAuthApi) -> int | None:
    """The ConfigMap read's error status, None when it was answered (404 here: authenticated, nothing there)."""
    try:
        await api.read_config_map("kube-system", "extension-apiserver-authentication")
    except KubeApiError as error:
        return error.status
    return None


async def test_a_revoked_token_is_fetched_again_after_the_401(kube: FakeKubeApi, plugin: CertificatePlugin) -> None:
    api = await review_client(kube, plugin)
    try:
        assert await status_of(api) is None
        runs = plugin.runs
        plugin.hand_out_token("token-2", time.time() + HOUR)
        kube.require_token = "token-2"  # token-1 revoked, an hour before its expiry
        assert [await status_of(api) for _ in range(3)] == [401, None, None]
        assert plugin.runs == runs + 1
        assert kube.requests[-1].headers["Authorization"] == "Bearer token-2"
    finally:
        await api.close()


async def test_closing_the_client_ends_the_plugin_run_under_way(kube: FakeKubeApi, plugin: CertificatePlugin) -> None:
    api = await review_client(kube, plugin)
    read: asyncio.Task[int | None] | None = None
    try:
        assert await status_of(api) is None
        kube.require_token = "token-2"
        assert await status_of(api) == 401
        plugin.hold()  # the run the 401 asks for hangs (a login no one answers)
        read = asyncio.create_task(status_of(api))
        await eventually(lambda: plugin.processes() != [])
        await api.close()
        assert await plugin.all_ended(), "the plugin outlived the client"
    finally:
        plugin.release()
        if read is not None:
            read.cancel()
            await asyncio.gather(read, return_exceptions=True)
        await api.close()
