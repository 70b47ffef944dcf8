"""A rollout step of the adapter's Deployment, as Kubernetes does it: the new replica starts and becomes Ready,
then the old one gets SIGTERM with the manifest's arguments. The Service's endpoints drop a terminating pod a
moment after the kubelet signals it (EndpointSlice controller, then kube-proxy or the aggregator's own endpoint
informer), so connections still reach the old replica for a while: it must answer them, with /readyz already
failing, hand the Lease over at once, and be gone well within terminationGracePeriodSeconds."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from exporter.flag_values import seconds_from_zero
from tests.actuation.conftest import KEY
from tests.actuation.test_crash_handover import EXPIRY_ATTEMPTS, LONG_LEASE, lease_reads, released_by
from tests.actuation.test_two_adapters import (
    Adapter,
    exporters,
    healthy,
    holder,
    runtime_files,
    start_adapter,
    wait_for,
)
from tests.fakes.kube import FakeKubeApi

__all__ = ["exporters"]  # the fixture, used by name

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment={KEY.deployment}")


def adapter_pod_spec() -> dict[str, Any]:
    deployment = yaml.safe_load((REPO / "manifests" / "base" / "deployment.yaml").read_text())
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def shipped_shutdown_args() -> list[str]:
    container = adapter_pod_spec()["containers"][0]
    return [arg for arg in container["args"] if arg.startswith("--shutdown-delay")]


async def status_of(url: str) -> int | str:
    """The status of one GET on a new connection, or the error a client (the aggregator) would get."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url, ssl=False) as response:
            return response.status
    except aiohttp.ClientError as error:
        return type(error).__name__


async def test_an_old_replica_answers_until_endpoints_drop_it_and_hands_the_lease_over_at_once(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    args = shipped_shutdown_args()
    assert args, "the Deployment sets --shutdown-delay"
    shutdown_delay_s = seconds_from_zero(args[0].split("=", 1)[1])
    grace_s = float(adapter_pod_spec().get("terminationGracePeriodSeconds", 30))
    old = await start_adapter(tmp_path, 0, targets, kubeconfig, *args, *LONG_LEASE)
    new: Adapter | None = None
    try:
        await healthy(old)
        await wait_for(lambda: old.identity is not None and holder(kube) == old.identity, 15, "the old one leads")
        new = await start_adapter(tmp_path, 1, targets, kubeconfig, *args, *LONG_LEASE)
        await healthy(new)
        await wait_for(lambda: new is not None and new.identity is not None, 10, "the new one logs its identity")
        before = await status_of(old.url + METRIC)
        assert before in (200, 503), before  # 503: warming up; either way an answer, not a refused connection

        mark = len(kube.requests)
        old.process.send_signal(signal.SIGTERM)
        await wait_for(lambda: released_by(kube.requests[mark:], old), 10, "the old replica releases the Lease")
        # The endpoints have not dropped the pod yet: the Lease is gone, the port still answers.
        assert await status_of(old.url + METRIC) == before, "a connection routed to the old pod is answered"
        assert await status_of(old.url + "/readyz") == 503, "its readiness fails"
        await wait_for(lambda: holder(kube) == new.identity, 10, "the new replica leads")
        attempts = lease_reads(kube.requests[mark:], new)
        assert attempts < EXPIRY_ATTEMPTS, f"{attempts} attempts: the new replica waited for the Lease to expire"

        async with asyncio.timeout(grace_s):
            assert await old.process.wait() == 0
        log = old.log.read_text()
        assert log.index("released by") < log.index(f"serving {shutdown_delay_s:g} s more (--shutdown-delay)")
    finally:
        await old.stop(signal.SIGKILL)
        if new is not None:
            await new.stop(signal.SIGKILL)
