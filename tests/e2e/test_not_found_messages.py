"""What `kubectl get --raw` says for a runtime the adapter does not know, in cluster mode (runtimes found through
the fake Kubernetes API): the 404's message must point at what to change. It said "or not in its targets", which
means nothing without `--targets`, and did not name `--namespaces` (a runtime in a namespace the adapter does not
watch), nor that `servingruntime=` takes the ServingRuntime's name (`servingruntime=modelmesh-serving-triton` asked
for the Deployment `modelmesh-serving-modelmesh-serving-triton`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.conftest import cluster_adapter_running, external_metric_once_refreshed

pytestmark = pytest.mark.slow

WATCHED, OTHER = "team-a", "team-b"
DEPLOYMENT = "modelmesh-serving-triton"


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    """An adapter discovering runtimes in `team-a` only; the same runtime exists in `team-b` too."""
    async with cluster_adapter_running(tmp_path, DEPLOYMENT, (WATCHED, OTHER), ["--namespaces", WATCHED]) as path:
        yield path


async def kubectl_get(kubeconfig: Path, namespace: str, selector: str) -> tuple[int, object]:
    return await external_metric_once_refreshed(kubeconfig, namespace, "modelmesh_desired_replicas", selector)


async def test_a_runtime_outside_namespaces_is_said_to_be_outside_them(kubeconfig: Path) -> None:
    code, message = await kubectl_get(kubeconfig, OTHER, f"deployment%3D{DEPLOYMENT}")
    assert code != 0 and "NotFound" in str(message), message
    assert "--namespaces" in str(message), message


async def test_servingruntime_given_the_deployment_name_says_to_give_the_servingruntime_name(
    kubeconfig: Path,
) -> None:
    code, message = await kubectl_get(kubeconfig, WATCHED, f"servingruntime%3D{DEPLOYMENT}")
    assert code != 0 and "NotFound" in str(message), message
    assert "servingruntime=triton" in str(message), message
