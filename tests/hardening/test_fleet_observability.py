"""What the platform engineer sees of a fleet-sized adapter: log lines that stay short and say once what
happened, however many runtimes there are. Fleets here are a few hundred runtimes, enough to show a line or a
count that grows with the fleet; the 5,000-runtime figures are `bench/bench_fleet_ops.py`'s."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
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


class FleetSource:
    """`FLEET` runtimes of two pods, all fresh but those named in `stale`."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.keys = [RuntimeKey("fleet", f"modelmesh-serving-rt{number}") for number in range(FLEET)]
        self.stale: set[RuntimeKey] = set()

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(PodSample(f"{key.deployment}-{pod}", requests_per_second=20.0, gpu_busy=0.5,
                                                     sampled_at=now - (600 if key in self.stale and pod else 1))
                                           for pod in range(2)), taken_at=now, replicas=2)
                for key in self.keys]

    async def close(self) -> None:
        return None


def runtime_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [record.getMessage() for record in caplog.records if record.name == "autoscaler.refresher"]
    caplog.clear()
    return lines


async def test_a_fleet_that_starts_or_turns_stale_together_is_logged_in_a_few_lines(
        caplog: pytest.LogCaptureFixture) -> None:
    source = FleetSource()
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")

    await refresher.refresh_once()  # the first refresh after a start: every runtime is new
    started = runtime_lines(caplog)
    assert len(started) <= 3, started[:5]
    assert any(f"{FLEET} runtimes now serving" in line for line in started)
    await refresher.refresh_once()
    assert runtime_lines(caplog) == []  # nothing changed: nothing said

    source.stale = set(source.keys[:150])  # a node lost: one pod of 150 runtimes stops reporting
    await refresher.refresh_once()
    stale = runtime_lines(caplog)
    assert len(stale) <= 3, stale[:5]
    assert any("150 runtimes now holding values" in line and "1/2 ready pods fresh" in line for line in stale)

    source.stale = set()  # the node is back
    await refresher.refresh_once()
    recovered = runtime_lines(caplog)
    assert len(recovered) == 1 and "150 runtimes now serving" in recovered[0], recovered[:5]

    source.stale = {source.keys[7]}  # one runtime alone: its own line, as ever
    await refresher.refresh_once()
    [alone] = runtime_lines(caplog)
    assert alone.startswith(f"runtime {source.keys[7]}: 1/2 ready pods fresh; ")
    assert max(len(line) for line in started + stale + recovered) < LONGEST_LINE
