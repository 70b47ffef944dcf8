"""What the platform engineer sees of a fleet-sized adapter: log lines that stay short and say once what
happened, however many runtimes there are. Fleets here are a few hundred runtimes, enough to show a line or a
count that grows with the fleet; the 5,000-runtime figures are `bench/bench_fleet_ops.py`'s."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import configuration

FLEET = 200
LONGEST_LINE = 2_000
"""A log line longer than this is one no person reads (and shippers cut lines at 16 KiB or so)."""


def fleet_of(kube: FakeKubeApi, namespace: str = "fleet") -> list[RuntimeKey]:
    keys = [RuntimeKey(namespace, f"modelmesh-serving-rt{number}") for number in range(FLEET)]
    for key in keys:
        kube.add_modelmesh_runtime(key.namespace, key.deployment, replicas=2)
    return keys


async def test_discovering_a_fleet_logs_one_short_line(kube: FakeKubeApi, caplog: pytest.LogCaptureFixture) -> None:
    keys = fleet_of(kube)
    caplog.set_level(logging.INFO, logger="autoscaler.sources")
    subject = KubePodDiscovery(configuration(kube), runtimes=[], discover=True, namespaces=["fleet"],
                               resync_interval_s=30, request_timeout_s=5.0)
    await subject.start()
    try:
        assert sorted(subject.inventory()) == sorted(keys)
    finally:
        await subject.close()
    added = [record.getMessage() for record in caplog.records if "added" in record.getMessage()]
    assert len(added) == 1
    assert f"{FLEET} runtimes added" in added[0]
    assert max(len(record.getMessage()) for record in caplog.records) < LONGEST_LINE
