"""Credentials that change while the adapter runs: a kubeconfig whose user reads its token from a file
(`tokenFile`, the way a projected service-account token is handed to a process outside its pod) or from an
exec plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`: tokens of 15 to 60 minutes). kubectl
and every client-go program pick the new token up without a restart; so must the adapter, or each of its
calls answers 401 Unauthorized from the moment the old token expires until someone restarts it."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.kube.client import KubeClient
from autoscaler.kube.reviews import KubeAuthApi, load_review_connection
from tests.fakes.kube import FakeKubeApi


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi(require_token="token-1") as kube:
        yield kube


def rotate(kube: FakeKubeApi, token_file: Path, token: str) -> None:
    """The token file is rewritten, and the old token expires (the API server now accepts only the new one)."""
    token_file.write_text(token)
    kube.require_token = token


async def authorization_after_rotation(kube: FakeKubeApi, token_file: Path,
                                       read: Callable[[], Awaitable[object]]) -> str:
    """`read` (a 404: authenticated, nothing there) before and after `rotate` to token-2; the Authorization header
    the second read sent. A read refused for its token raises instead."""
    assert await read() is None
    rotate(kube, token_file, "token-2")
    assert await read() is None
    return kube.requests[-1].headers["Authorization"]


async def test_a_rotated_token_file_is_read_again_without_a_restart(kube: FakeKubeApi, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="ml", token_file=token_file)
    client = await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=2.0)
    try:
        lease = partial(client.get_lease, "ml", "modelmesh-autoscaler")
        assert await authorization_after_rotation(kube, token_file, lease) == "Bearer token-2"
    finally:
        await client.close()


def exec_plugin_kubeconfig(kube: FakeKubeApi, tmp_path: Path, token_file: Path) -> Path:
    """A kubeconfig whose user runs a plugin that hands out the token in `token_file`, already expired (the fake
    API server does not check expiries), so every call finds it expired, waits for the plugin to run again and goes
    out with what it hands out; a token still valid would go out while the plugin runs. A missing file makes the
    plugin fail. Each run appends a line to `runs` beside it."""
    expires = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plugin = tmp_path / "plugin.py"
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": "TOKEN", "expirationTimestamp": expires}}
    plugin.write_text(
        "import json, pathlib\n"
        f"with open({str(tmp_path / 'runs')!r}, 'a') as runs: runs.write('run\\n')\n"
        f"credential = json.loads({json.dumps(json.dumps(credential))})\n"
        f"credential['status']['token'] = pathlib.Path({str(token_file)!r}).read_text()\n"
        "print(json.dumps(credential))\n"
    )
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="ml")
    document = yaml.safe_load(kubeconfig.read_text())
    document["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                             "command": sys.executable, "args": [str(plugin)],
                                             "interactiveMode": "Never"}}
    kubeconfig.write_text(yaml.safe_dump(document))
    return kubeconfig


def plugin_runs(tmp_path: Path) -> int:
    runs = tmp_path / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


async def test_an_exec_plugins_expired_token_is_fetched_again(kube: FakeKubeApi, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    kubeconfig = exec_plugin_kubeconfig(kube, tmp_path, token_file)
    client = await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=5.0)
    try:
        lease = partial(client.get_lease, "ml", "modelmesh-autoscaler")
        assert await authorization_after_rotation(kube, token_file, lease) == "Bearer token-2"
    finally:
        await client.close()


async def test_the_reviews_of_an_exec_plugin_user_carry_its_token_fetched_again(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The one user whose reviews load the library in a serving worker: only the library runs the plugin."""
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    connection = await load_review_connection(exec_plugin_kubeconfig(kube, tmp_path, token_file))
    assert connection.from_plugin
    reviews = await KubeAuthApi.connect(connection, timeout_s=5.0)
    try:
        config_map = partial(reviews.read_config_map, "ml", "absent")
        assert await authorization_after_rotation(kube, token_file, config_map) == "Bearer token-2"
    finally:
        await reviews.close()


async def test_an_exec_plugin_that_fails_leaves_the_last_token_and_is_not_run_at_every_call(
    kube: FakeKubeApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A plugin that fails (the cloud CLI logged out, its endpoint down) must not fail the calls its last token
    still authenticates, nor be started again by each of them (a process per API call), nor warn at each."""
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    kubeconfig = exec_plugin_kubeconfig(kube, tmp_path, token_file)
    client = await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=5.0)
    try:
        token_file.unlink()
        before = plugin_runs(tmp_path)
        with caplog.at_level(logging.INFO, "autoscaler.kube"):
            for _ in range(3):
                assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    finally:
        await client.close()
    assert plugin_runs(tmp_path) - before == 1
    [warning] = [r.getMessage() for r in caplog.records if r.name == "autoscaler.kube"]
    assert warning.startswith("Kubernetes credentials: cannot refresh the token of the kubeconfig's exec plugin, "
                              "using the last token: ")


async def test_an_unreadable_token_file_keeps_the_last_token_and_says_why_once(
    kube: FakeKubeApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubelet swaps the file with a rename; a file that is gone (a volume unmounted, a path mistyped in
    an edit) must not fail calls the last token still authenticates, nor log at every request."""
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="ml", token_file=token_file)
    client = await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=2.0)
    try:
        token_file.unlink()
        with caplog.at_level(logging.INFO, "autoscaler.kube"):
            for _ in range(3):
                assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            assert kube.requests[-1].headers["Authorization"] == "Bearer token-1"
            rotate(kube, token_file, "token-2")
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    finally:
        await client.close()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "autoscaler.kube"]
    assert lines == [
        ("WARNING", f"Kubernetes credentials: cannot refresh the token from {token_file}, using the last token: "
                    f"{token_file} cannot be read"),
        ("INFO", f"Kubernetes credentials: the token from {token_file} is read again"),
    ]


@pytest.fixture
async def in_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FakeKubeApi, Path]]:
    """The fake API as a pod sees it (its address in the environment, the service account's token, CA and
    namespace in files), with the library's in-cluster hook reading the token file at every request (its
    minute shortened); the fake and the token file."""
    from kubernetes.aio.config import incluster_config

    async with FakeKubeApi(require_token="token-1", tls=True) as kube:
        assert kube.ca_pem is not None
        token_file, ca_file, namespace_file = tmp_path / "token", tmp_path / "ca.crt", tmp_path / "namespace"
        token_file.write_text("token-1")
        ca_file.write_bytes(kube.ca_pem)
        namespace_file.write_text("ml")
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", kube.host)
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(kube.port))
        monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token_file))
        monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca_file))
        monkeypatch.setattr("autoscaler.kube.config._SERVICE_ACCOUNT_NAMESPACE", namespace_file)
        loader_init = incluster_config.InClusterConfigLoader.__init__

        def every_request(self: Any, *args: Any, **kwargs: Any) -> None:
            loader_init(self, *args, **kwargs)  # type: ignore[no-untyped-call]
            self._token_refresh_period = timedelta(0)

        monkeypatch.setattr(incluster_config.InClusterConfigLoader, "__init__", every_request)
        yield kube, token_file


async def test_in_a_cluster_the_rotated_service_account_token_is_read_again(
    in_a_pod: tuple[FakeKubeApi, Path]
) -> None:
    """The kubelet rewrites the projected service-account token well before it expires (at 80% of its hour).
    The library's in-cluster hook reads the file again once a minute; here every request (the minute is
    shortened), so the test shows the adapter's clients going through that hook with the new token."""
    kube, token_file = in_a_pod
    client = await KubeClient.connect(None, user_agent="modelmesh-autoscaler/test", timeout_s=2.0)
    try:
        assert client.default_namespace == "ml"
        lease = partial(client.get_lease, "ml", "modelmesh-autoscaler")
        assert await authorization_after_rotation(kube, token_file, lease) == "bearer token-2"
    finally:
        await client.close()


async def test_in_a_cluster_the_reviews_read_the_rotated_service_account_token_again(
    in_a_pod: tuple[FakeKubeApi, Path]
) -> None:
    """The reviews of a serving worker read the token file themselves, without the library: as soon as the
    kubelet has rewritten it."""
    kube, token_file = in_a_pod
    reviews = KubeAuthApi(await load_review_connection(None), timeout_s=2.0)
    try:
        config_map = partial(reviews.read_config_map, "ml", "absent")
        assert await authorization_after_rotation(kube, token_file, config_map) == "Bearer token-2"
    finally:
        await reviews.close()
