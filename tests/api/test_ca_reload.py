"""The front-proxy CA rotated in `kube-system/extension-apiserver-authentication` (or in the CA file) is
honoured without restarting the adapter: the aggregator's certificate from the new CA authenticates, and one
from a CA dropped from the bundle stops authenticating."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
import pytest
import trustme

from autoscaler.api import auth, authconfig
from autoscaler.api.app import build_api_app
from autoscaler.api.auth import ApiSecurity, build_api_security
from autoscaler.api.ca_reload import ClientCaReloader
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, PROXY_CN, Pki, refresher_with, runtime_view
from tests.api.conftest import listening
from tests.fakes.kube import FakeKubeApi
from tests.support.certificates import issue_cert
from tests.support.stubborn import StubbornRequest


@dataclass
class Served:
    url: str
    security: ApiSecurity

    async def status_as(self, pki: Pki, leaf: trustme.LeafCert) -> int | str:
        """The answer to the aggregator's kind of request, or the TLS failure when the handshake fails."""
        try:
            connector = aiohttp.TCPConnector(ssl=pki.client_context(leaf))
            async with aiohttp.ClientSession(connector=connector) as session, \
                    session.get(self.url, headers={"X-Remote-User": "hpa"}) as response:
                return response.status
        except aiohttp.ClientConnectionError as error:
            return type(error).__name__

    async def reload(self) -> bool:
        assert self.security.reload_client_cas is not None
        return await self.security.reload_client_cas()


def bundle(*cas: trustme.CA) -> str:
    return "".join(ca.cert_pem.bytes().decode() for ca in cas)


@pytest.fixture
async def served(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[Served]:
    kube.set_authentication_config(requestheader_client_ca=bundle(pki.front_proxy_ca), allowed_names=[PROXY_CN])
    kube.allow(user="hpa")
    metrics, tls = AdapterMetrics(), pki.server_context()
    security = await build_api_security(settings_for(files=False), tls, metrics)
    try:
        async with listening(build_api_app(refresher_with(runtime_view()), metrics, security.gate), tls) as port:
            yield Served(f"https://127.0.0.1:{port}/debug/runtimes/{KEY.namespace}/{KEY.deployment}", security)
    finally:
        await security.close()


async def test_a_rotated_front_proxy_ca_is_honoured_without_a_restart(
    served: Served, pki: Pki, kube: FakeKubeApi
) -> None:
    new_ca = trustme.CA()
    new_proxy = issue_cert(new_ca, common_name=PROXY_CN)
    assert await served.status_as(pki, pki.proxy) == 200
    assert await served.status_as(pki, new_proxy) != 200  # not trusted yet
    assert not await served.reload()  # nothing changed

    # Mid-rotation the cluster publishes both CAs; then only the new one.
    kube.set_authentication_config(requestheader_client_ca=bundle(pki.front_proxy_ca, new_ca),
                                   allowed_names=[PROXY_CN])
    assert await served.reload()
    assert (await served.status_as(pki, pki.proxy), await served.status_as(pki, new_proxy)) == (200, 200)

    kube.set_authentication_config(requestheader_client_ca=bundle(new_ca), allowed_names=[PROXY_CN])
    assert await served.reload()
    assert await served.status_as(pki, new_proxy) == 200
    assert await served.status_as(pki, pki.proxy) == 401  # the dropped CA no longer authenticates


async def test_an_unreadable_or_broken_source_keeps_the_current_cas(
    served: Served, pki: Pki, kube: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    kube.set_authentication_config(requestheader_client_ca="not a certificate", allowed_names=[PROXY_CN])

    assert not await served.reload()

    assert await served.status_as(pki, pki.proxy) == 200
    assert "keeping the current ones" in caplog.text


async def test_a_dropped_ca_stops_authenticating_on_a_connection_kept_open(
    served: Served, pki: Pki, kube: FakeKubeApi
) -> None:
    """The aggregator keeps its connections open for hours: a CA dropped from the bundle must stop its
    certificate on the connection already open, from the next request, not only on new connections."""
    connections = 0

    async def opened(*_: object) -> None:
        nonlocal connections
        connections += 1

    tracing = aiohttp.TraceConfig()
    tracing.on_connection_create_end.append(opened)
    connector = aiohttp.TCPConnector(ssl=pki.client_context(pki.proxy), limit=1)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[tracing]) as session:
        async def status() -> int:
            async with session.get(served.url, headers={"X-Remote-User": "hpa"}) as response:
                await response.read()
                return response.status

        assert [await status(), await status()] == [200, 200]
        kube.set_authentication_config(requestheader_client_ca=bundle(trustme.CA()), allowed_names=[PROXY_CN])
        assert await served.reload()
        assert await status() == 401
    assert connections == 1  # every request went over the one connection


async def test_closing_stops_a_reload_whose_read_takes_its_first_cancel_for_a_timeout(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reload reads the ConfigMap over HTTP. A read that turns the adapter's stop into its own timeout is
    "client CAs not re-read", then a minute's sleep and another read: the shutdown must not wait on it."""
    kube.set_authentication_config(requestheader_client_ca=bundle(pki.front_proxy_ca), allowed_names=[PROXY_CN])
    monkeypatch.setattr(auth, "ClientCaReloader", functools.partial(ClientCaReloader, interval_s=0.01))
    security = await build_api_security(settings_for(files=False), pki.server_context(), AdapterMetrics())
    read = StubbornRequest()

    async def read_that_never_answers(*_: object) -> None:
        await read()

    monkeypatch.setattr(authconfig, "resolve", read_that_never_answers)
    await asyncio.wait_for(read.waiting.wait(), timeout=10)
    closing = asyncio.create_task(security.close())
    done, _ = await asyncio.wait({closing}, timeout=10)  # not `wait_for`: its cancel would stop the reload
    assert done == {closing}, "close() still waits for the reload ten seconds on"
    assert read.took_a_cancel_for_a_timeout


async def test_narrowed_allowed_names_apply_without_a_restart_on_a_connection_kept_open(
    served: Served, pki: Pki, kube: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    """A front-proxy client certificate leaked: the cluster's allowed names are changed to exclude its CN. The
    adapter kept trusting that CN to assert any user until every replica was restarted (it only logged "restart
    the adapter to apply them"); kube-apiserver's own extension servers apply the change as they re-read the
    ConfigMap. The aggregator's open connection must be judged by the new names from its next request."""
    new_proxy = issue_cert(pki.front_proxy_ca, common_name="front-proxy-client-2")
    connector = aiohttp.TCPConnector(ssl=pki.client_context(pki.proxy), limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def status() -> int:
            async with session.get(served.url, headers={"X-Remote-User": "hpa"}) as response:
                await response.read()
                return response.status

        assert [await status(), await status()] == [200, 200]
        kube.set_authentication_config(requestheader_client_ca=bundle(pki.front_proxy_ca),
                                       allowed_names=["front-proxy-client-2"])
        with caplog.at_level(logging.INFO, "autoscaler.api.ca_reload"):
            assert await served.reload()
        assert await status() == 401
    assert await served.status_as(pki, new_proxy) == 200
    assert "restart" not in caplog.text
    assert "front-proxy header rules and allowed names reloaded" in caplog.text


async def test_changed_header_rules_are_not_applied_where_the_adapter_has_no_front_proxy(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings], caplog: pytest.LogCaptureFixture
) -> None:
    """Started with a client CA only (no front-proxy CA, so no header authenticator): a change to the
    ConfigMap's allowed names has nothing to apply to, and is not said as reloaded."""
    kube.set_authentication_config(client_ca=bundle(pki.client_ca), allowed_names=[PROXY_CN])
    security = await build_api_security(settings_for(files=False), pki.server_context(), AdapterMetrics())
    try:
        assert security.reload_client_cas is not None
        kube.set_authentication_config(client_ca=bundle(pki.client_ca), allowed_names=["front-proxy-client-2"])
        with caplog.at_level(logging.INFO, "autoscaler.api.ca_reload"):
            assert not await security.reload_client_cas()
    finally:
        await security.close()
    assert "reloaded" not in caplog.text
