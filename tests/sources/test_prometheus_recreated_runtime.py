"""A runtime whose Deployment is deleted and created again under its name is another runtime, for the Prometheus
source too: what it kept of the old object (since when none of its Ready pods had series, and whether the log
said so) is not the new one's (`autoscaler.forgetting`)."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN, UNSEEN_WARN_AFTER_S
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals

pytestmark = pytest.mark.slow

UNSCRAPED = RuntimeKey("team-b", "modelmesh-serving-ovms")


def deployment(uid: str, pod: str) -> RuntimeInventory:
    return RuntimeInventory(UNSCRAPED, (PodTarget(name=pod, ready=True, url=None),), replicas=1, uid=uid)


def unseen_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno == logging.WARNING and f"runtime {UNSCRAPED.namespace}/{UNSCRAPED.deployment}"
            in record.getMessage()]


async def test_a_runtime_created_again_gets_its_own_grace_before_it_is_named_unseen(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
    now: float,
) -> None:
    """team-b's runtime had no series for 100 s (its pods starting) when its Deployment was replaced. The new
    object's pods were named "not scraped" at the next refresh, 10 s after they came, and /debug dated that from
    the old object's pods: the grace a new pod gets to be discovered and scraped was the old one's, spent."""
    prom = await start_prometheus(exporter_series("team-a", "a-1", now - AGE_S, signals(40, 0.1, 2, 0.9, 5),
                                                  last_success=now - AGE_S))
    discovery = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]})
    discovery.set_runtime(deployment("uid-old", "ovms-old-1"))
    source = PrometheusSource(discovery, prom.url)
    sources.append(source)
    await source.collect(now)
    await source.collect(now + 100)

    discovery.set_runtime(deployment("uid-new", "ovms-new-1"))  # `kubectl replace --force`
    created = now + 110
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.prometheus"):
        await source.collect(created)
        await source.collect(now + 130)
        assert unseen_warnings(caplog) == []
        (problem,) = source.problems(UNSCRAPED)
        assert (problem.reason, problem.since) == (REASON_UNSEEN, created)

        await source.collect(created + UNSEEN_WARN_AFTER_S)
    (warning,) = unseen_warnings(caplog)
    assert "ovms-new-1" in warning
