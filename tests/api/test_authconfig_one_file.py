"""One CA file given, the other CA from `kube-system/extension-apiserver-authentication`, each on its own, as
k8s.io/apiserver's `lookupMissingConfigInCluster` does. Before, giving only `--client-ca-file` (pinning the
client CA, a likely hardening) switched the front-proxy CA off: the aggregator's certificate was refused at
the TLS handshake and every HPA request failed; giving only `--requestheader-client-ca-file` dropped
client-certificate authentication the same way."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from autoscaler.api import authconfig
from autoscaler.api.auth import build_api_security
from autoscaler.api.authconfig import AuthConfigError
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.certificates import issue_cert

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
CONFIG_MAP = "ConfigMap kube-system/extension-apiserver-authentication"
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"


def pem(ca: trustme.CA) -> str:
    return ca.cert_pem.bytes().decode()


def authentication_line(caplog: pytest.LogCaptureFixture) -> str:
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("authentication from ")]
    return line


async def test_only_the_client_ca_file_leaves_the_front_proxy_to_the_config_map(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    kube.set_authentication_config(requestheader_client_ca=pem(pki.front_proxy_ca),
                                   allowed_names=["front-proxy-client"])
    kube.allow(user=HPA)
    kube.allow(user="alice")
    _, client_ca_file = pki.write_cas(tmp_path)
    settings = settings_for(files=False, client_ca_file=client_ca_file, requestheader_allowed_names=())
    caplog.set_level(logging.INFO, logger="autoscaler.api.auth")
    async with secured_api(pki, kube, settings) as api:
        aggregator = await api.get(DEBUG, cert=pki.proxy, headers={"X-Remote-User": HPA})
        client = await api.get(DEBUG, cert=pki.alice)
        # the ConfigMap's allowed names came with its CA (the flags named none: any CN)
        not_allowed = await api.get(DEBUG, cert=pki.rogue_proxy, headers={"X-Remote-User": HPA})
    assert (aggregator[0], client[0], not_allowed[0]) == (200, 200, 401)
    line = authentication_line(caplog)
    assert f"--client-ca-file (client CA) and {CONFIG_MAP} (front-proxy CA, header rules)" in line, line
    assert "allowed front-proxy names: front-proxy-client" in line, line
    assert not [r for r in caplog.records if "no requestheader CA" in r.getMessage()]


async def test_only_the_requestheader_file_leaves_client_certificates_to_the_config_map(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    kube.set_authentication_config(client_ca=pem(pki.client_ca), allowed_names=["someone-else"])
    kube.allow(user=HPA)
    kube.allow(user="alice")
    requestheader_ca_file, _ = pki.write_cas(tmp_path)
    settings = settings_for(files=False, requestheader_client_ca_file=requestheader_ca_file)
    caplog.set_level(logging.INFO, logger="autoscaler.api.auth")
    async with secured_api(pki, kube, settings) as api:
        client = await api.get(DEBUG, cert=pki.alice)
        # the header rules stay the flags' with the flag's CA (--requestheader-allowed-names front-proxy-client)
        aggregator = await api.get(DEBUG, cert=pki.proxy, headers={"X-Remote-User": HPA})
    assert (client[0], aggregator[0]) == (200, 200)
    line = authentication_line(caplog)
    assert f"--requestheader-client-ca-file (front-proxy CA, header rules from the flags) and {CONFIG_MAP} " \
           "(client CA)" in line, line


async def test_a_rotated_front_proxy_ca_in_the_config_map_is_followed_beside_a_client_ca_file(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path) -> None:
    kube.set_authentication_config(requestheader_client_ca=pem(pki.front_proxy_ca))
    kube.allow(user=HPA)
    _, client_ca_file = pki.write_cas(tmp_path)
    rotated = trustme.CA()
    new_proxy = issue_cert(rotated, common_name="front-proxy-client")
    async with secured_api(pki, kube, settings_for(files=False, client_ca_file=client_ca_file)) as api:
        kube.set_authentication_config(requestheader_client_ca=pem(rotated))
        assert api.security.reload_client_cas is not None
        assert await api.security.reload_client_cas()
        assert (await api.get(DEBUG, cert=new_proxy, headers={"X-Remote-User": HPA}))[0] == 200
        assert (await api.get(DEBUG, cert=pki.proxy, headers={"X-Remote-User": HPA}))[0] == 401


async def test_one_file_and_no_config_map_serves_with_that_file_alone(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """As kube does: no ConfigMap is no CA from it, not a start-up error, since a CA was given."""
    kube.delete_object("configmaps", *authconfig.AUTH_CONFIG_MAP)
    kube.allow(user="alice")
    _, client_ca_file = pki.write_cas(tmp_path)
    caplog.set_level(logging.INFO, logger="autoscaler.api.auth")
    async with secured_api(pki, kube, settings_for(files=False, client_ca_file=client_ca_file)) as api:
        assert (await api.get(DEBUG, cert=pki.alice))[0] == 200
    assert f"--client-ca-file (client CA; {CONFIG_MAP} does not exist: no front-proxy CA)" in \
        authentication_line(caplog)
    assert [r for r in caplog.records if "no requestheader CA" in r.getMessage()]


async def test_one_file_and_an_unreadable_config_map_stops_start_up(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As without files: serving without the other CA would refuse its clients, the HPA's aggregator first."""
    monkeypatch.setattr(authconfig, "LOOKUP_BACKOFF_S", 0.0)
    kube.fail("configmaps", 403, times=None)
    _, client_ca_file = pki.write_cas(tmp_path)
    with pytest.raises(AuthConfigError, match=f"no --requestheader-client-ca-file given and {CONFIG_MAP} cannot "
                                              "be read"):
        await build_api_security(settings_for(files=False, client_ca_file=client_ca_file), None, AdapterMetrics())
