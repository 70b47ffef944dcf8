"""Leader election when the adapter's RBAC on Leases is incomplete, as an operator who trimmed the Role sees it:
the log names the missing permission once, however many attempts follow (one every 2 s)."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import KubeClient
from tests.fakes.kube import FakeKubeApi


def candidate(client: KubeClient) -> LeaseElector:
    return LeaseElector(client, LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity="a"))


@pytest.mark.parametrize(
    ("verb", "existing"),
    [("get", False), ("create", False), ("update", True)],
    ids=["no get", "no create (a Role limited by resourceNames)", "no update"],
)
async def test_a_missing_lease_permission_is_one_warning_naming_it(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, verb: str, existing: bool
) -> None:
    if existing:  # held by nobody: this replica must update it to take it
        kube.put_object("leases", {"metadata": {"name": "modelmesh-autoscaler", "namespace": "ml"}, "spec": {}})
    kube.forbid(verb, "leases", "ml")
    elector = candidate(kube_client)
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.leader"):
        for _ in range(10):
            assert not await elector.try_acquire_or_renew()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 1, lines
    level, message = lines[0]
    assert level == "WARNING"
    assert f'cannot {verb} resource "leases" in API group "coordination.k8s.io"' in message


async def test_a_lost_race_is_no_failure_and_no_recovery_to_log(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    elector = candidate(kube_client)
    kube.fail("/leases$", 409, times=1, method="POST")  # another replica created it first
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.leader"):
        assert not await elector.try_acquire_or_renew()
        assert await elector.try_acquire_or_renew()
    assert [r.getMessage() for r in caplog.records] == []
