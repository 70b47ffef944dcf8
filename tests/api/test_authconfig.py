"""Where authentication settings come from: files, or the cluster's extension-apiserver-authentication."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from pytest_aiohttp import AiohttpServer

from autoscaler.api import authconfig
from autoscaler.api.app import build_api_app
from autoscaler.api.auth import build_api_security
from autoscaler.api.authconfig import AuthConfigError, from_config_map, resolve
from autoscaler.kube.errors import KubeConfigError
from autoscaler.kube.reviews import KubeAuthApi, load_review_connection
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki, refresher_with, runtime_view
from tests.fakes.kube import FakeKubeApi


async def kube_api(settings: ServeSettings) -> KubeAuthApi:
    return KubeAuthApi(await load_review_connection(settings.kubeconfig), timeout_s=0.5)


async def test_without_files_the_config_map_is_used(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings]) -> None:
    kube.set_authentication_config(
        client_ca=pki.client_ca.cert_pem.bytes().decode(),
        requestheader_client_ca=pki.front_proxy_ca.cert_pem.bytes().decode(),
        allowed_names=["aggregator"], group_headers=["X-Remote-Group", "X-Groups"], uid_headers=["X-Remote-Uid"],
    )
    settings = settings_for(files=False)
    api = await kube_api(settings)
    try:
        config = await resolve(settings, api)
    finally:
        await api.close()
    assert config.source == "ConfigMap kube-system/extension-apiserver-authentication"
    assert config.requestheader_ca is not None and config.client_ca is not None
    assert config.rules.allowed_names == frozenset({"aggregator"})
    assert config.rules.group_headers == ("X-Remote-Group", "X-Groups")
    assert config.rules.uid_headers == ("X-Remote-Uid",)


async def test_config_map_settings_admit_the_front_proxy(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings],
        aiohttp_server: AiohttpServer) -> None:
    kube.set_authentication_config(requestheader_client_ca=pki.front_proxy_ca.cert_pem.bytes().decode(),
                                   allowed_names=[], uid_headers=["X-Remote-Uid"])
    kube.allow(user="hpa")
    metrics, tls = AdapterMetrics(), pki.server_context()
    security = await build_api_security(settings_for(files=False), tls, metrics)
    server = await aiohttp_server(build_api_app(refresher_with(runtime_view()), metrics, security.gate),
                                  ssl=tls)
    url = f"https://127.0.0.1:{server.port}/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
    try:
        connector = aiohttp.TCPConnector(ssl=pki.client_context(pki.rogue_proxy))
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get(url, headers={"X-Remote-User": "hpa", "X-Remote-Uid": "u-1"}) as response:
            assert response.status == 200  # empty allowed names: any CN from the requestheader CA
    finally:
        await security.close()
    assert kube.access_reviews[0]["uid"] == "u-1"


async def test_files_win_over_the_config_map(kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> None:
    settings = settings_for()
    api = await kube_api(settings)
    try:
        config = await resolve(settings, api)
    finally:
        await api.close()
    assert config.source == "flags"
    assert config.rules.allowed_names == frozenset({"front-proxy-client"})
    assert not any(r.path.endswith("extension-apiserver-authentication") for r in kube.requests)


async def test_a_missing_config_map_stops_start_up(
        kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> None:
    kube.delete_object("configmaps", *authconfig.AUTH_CONFIG_MAP)
    settings = settings_for(files=False)
    with pytest.raises(AuthConfigError, match="does not exist"):
        await build_api_security(settings, None, AdapterMetrics())


async def test_an_unreachable_api_at_start_up_is_retried_then_stops_start_up(
        kube: FakeKubeApi, settings_for: Callable[..., ServeSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(authconfig, "LOOKUP_BACKOFF_S", 0.0)
    kube.fail("configmaps", 503, times=authconfig.LOOKUP_ATTEMPTS - 1)
    settings = settings_for(files=False)
    security = await build_api_security(settings, None, AdapterMetrics())
    await security.close()
    kube.fail("configmaps", 503, times=None)
    with pytest.raises(AuthConfigError, match="cannot be read"):
        await build_api_security(settings, None, AdapterMetrics())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"requestheader-allowed-names": "not json"}, "not JSON"),
        ({"requestheader-allowed-names": json.dumps({"a": 1})}, "not a list of strings"),
        ({"requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"},
         "not a PEM certificate bundle"),
    ],
    ids=["not json", "not a list", "bad pem"],
)
def test_a_garbled_config_map_is_a_clear_error(data: dict[str, str], message: str) -> None:
    with pytest.raises(AuthConfigError, match=message):
        from_config_map(data)


def test_unreadable_ca_files_are_start_up_errors(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="cannot read --client-ca-file"):
        authconfig.from_settings(ServeSettings(client_ca_file=tmp_path / "missing.crt"))
    (tmp_path / "empty.crt").write_text("")
    with pytest.raises(AuthConfigError, match="requestheader-client-ca-file"):
        authconfig.from_settings(ServeSettings(requestheader_client_ca_file=tmp_path / "empty.crt"))


async def test_an_empty_kubeconfig_variable_is_unset_as_for_kubectl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`export KUBECONFIG=` (an empty value, from a profile or an env template): kubectl reads ~/.kube/config;
    `serve` stopped with "Config not found: " (the library took the empty string for the file)."""
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    connection = await load_review_connection(None)
    assert connection.host == "https://127.0.0.1:6443"


async def test_no_kubeconfig_anywhere_is_a_start_up_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="--insecure-dev"):
        await load_review_connection(None)
    with pytest.raises(KubeConfigError):
        await load_review_connection(tmp_path / "absent")
