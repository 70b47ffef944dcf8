"""The exec-token tests' setting, written once: the fake API taking `token-1` alone, and a kubeconfig exec plugin
(`CertificatePlugin`) handing that token out with the expiry each test needs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi
from tests.kube.client_cert_api import CertificatePlugin


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi(require_token="token-1") as kube:
        yield kube


def token_plugin(folder: Path, valid_for_s: float) -> CertificatePlugin:
    """A plugin in `folder` that hands out token-1, expiring `valid_for_s` from now (negative: expired already)."""
    plugin = CertificatePlugin(folder)
    plugin.hand_out_token("token-1", time.time() + valid_for_s)
    return plugin


async def connect(kube: FakeKubeApi, plugin: CertificatePlugin, *, shell_wrapped: bool = False,
                  timeout_s: float = 5.0) -> KubeClient:
    """The adapter's client for `kube`, its credential from `plugin` (run through `sh -c` where `shell_wrapped`),
    in namespace ml."""
    return await KubeClient.connect(plugin.kubeconfig(kube, "ml", shell_wrapped=shell_wrapped),
                                    user_agent="modelmesh-autoscaler/test", timeout_s=timeout_s)
