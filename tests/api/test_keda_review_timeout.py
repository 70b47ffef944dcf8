"""What KEDA sees when the adapter cannot review its token. The adapter tries a TokenReview the Kubernetes API fails
for up to 10 s (`reviews.DEFAULT_TIMEOUT_S`, 5 tries) before it answers 401; KEDA's metrics-api scaler gives up
after its HTTP timeout, 3 s by default (`KEDA_HTTP_DEFAULT_TIMEOUT`, cmd/operator/main.go), so KEDA showed
`context deadline exceeded` where docs/operations.md promised a 401. The docs now say so and give the trigger
`timeout` that lets KEDA read the adapter's answer: a client that waits that long gets the 401."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from autoscaler.kube.reviews import DEFAULT_TIMEOUT_S
from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi

OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
KEDA_DEFAULT_TIMEOUT_S = 3.0
"""KEDA's HTTP timeout when neither `KEDA_HTTP_DEFAULT_TIMEOUT` nor the trigger's `timeout` is set."""
KEDA_USER = "system:serviceaccount:modelmesh-serving:modelmesh-autoscaler-keda"
KEDA_PATH = "/keda/v1/namespaces/ml/runtimes/modelmesh-serving-triton"


def documented_trigger_timeout_s() -> float:
    """The `timeout` operations.md's KEDA section gives the trigger's metadata."""
    section = OPERATIONS[OPERATIONS.index("### KEDA: what to set"):]
    section = section[:section.index("\n### ")]
    found = re.findall(r'^\s*timeout: "(\d+)s"', section, flags=re.M)
    assert len(found) == 1, "the KEDA section gives no trigger `timeout`"
    return float(found[0])


@pytest.fixture
async def shipped(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    """The API with the review client's shipped deadline, KEDA's token known and granted."""
    async with secured_api(pki, kube, settings_for(), kube_timeout_s=DEFAULT_TIMEOUT_S) as api:
        api.kube.tokens["keda"] = (KEDA_USER, ["system:serviceaccounts"])
        api.kube.allow(user=KEDA_USER, resource="runtimes")
        yield api


def test_the_documented_timeout_outlasts_the_adapters_wait_for_a_review() -> None:
    assert documented_trigger_timeout_s() > DEFAULT_TIMEOUT_S


async def test_with_the_api_server_failing_keda_times_out_by_default_and_reads_401_with_the_documented_timeout(
        shipped: SecuredApi) -> None:
    shipped.kube.fail("tokenreviews", 503, times=None)

    with pytest.raises(TimeoutError):  # what KEDA shows as `context deadline exceeded`
        async with asyncio.timeout(KEDA_DEFAULT_TIMEOUT_S):
            await shipped.get(KEDA_PATH, token="keda")
    async with asyncio.timeout(documented_trigger_timeout_s()):
        answer, _ = await shipped.get(KEDA_PATH, token="keda")
    assert answer == 401
