"""A `runtimes:` entry of the policy file named like its ServingRuntime, not its Deployment: discovery's warning
says which name to write, or the runtime that exists scales on the defaults without a word about why."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi

NS = "modelmesh-serving"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def test_a_configured_runtime_named_like_its_servingruntime_names_the_deployment_to_write(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=1)
    settings = Configuration()
    settings.host = kube.url
    subject = KubePodDiscovery(settings, runtimes=[RuntimeKey(NS, "triton")], discover=True, namespaces=[NS],
                               request_timeout_s=2.0, backoff_initial_s=0.02, backoff_max_s=0.1)
    with caplog.at_level(logging.WARNING, logger="autoscaler.sources"):
        await subject.start()
        await subject.close()
    [message] = [r.getMessage() for r in caplog.records if "has no Deployment" in r.getMessage()]
    assert f"{NS}/triton" in message and "deployment: modelmesh-serving-triton" in message
