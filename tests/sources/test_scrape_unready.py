"""The scrape source, through real exporters and the fake Kubernetes API, with the decision on its snapshots: a hot
pod that fails its readiness probe keeps its load in the served values (reviewer finding rv2 #2)."""

from __future__ import annotations

import time

import pytest

from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.test_scrape_source import NS, Cluster, cluster, near, rates, snapshot_until, source

pytestmark = pytest.mark.slow
__all__ = ["cluster", "source"]  # the fixtures, used by name

FAST = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0)
DESIRED = ServedMetric.DESIRED_REPLICAS


async def test_a_hot_pod_that_fails_its_probe_keeps_the_replicas_served(cluster: Cluster, source: ScrapeSource) -> None:
    await cluster.start_pod("triton-hot", "127.0.0.2", rps=400)
    await cluster.start_pod("triton-cold", "127.0.0.3", rps=20)
    good = await snapshot_until(source, lambda s: near(rates(s).get("triton-hot"), 400)
                                and near(rates(s).get("triton-cold"), 20))
    first, memory = decide(good, FAST, None, time.time(), 30.0)
    replicas = first.values[DESIRED].value
    assert replicas is not None and replicas >= 5.0  # about 420 req/s, skewed up by the hot pod

    cluster.kube.set_ready(NS, "triton-hot", False)
    held = await snapshot_until(source, lambda s: not next(p for p in s.pods if p.name == "triton-hot").ready)
    hot = next(p for p in held.pods if p.name == "triton-hot")
    assert hot.unready_since is not None and near(hot.requests_per_second, 400)

    view, _ = decide(held, FAST, memory, time.time(), 30.0)
    assert view.values[DESIRED].value == replicas  # left out, the hot pod read as none: 1 replica
    assert "was serving" in view.held["pod triton-hot"]
