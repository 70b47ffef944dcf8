"""The exporter's `--modelmesh-url` must reach this pod's own ModelMesh: its host an address of this pod.

Pointed at the `modelmesh-serving` Service (port `prometheus`, 2112 over every runtime pod), each read reached
another pod, and a read of a pod with lower counts was taken for a ModelMesh restart that added that pod's whole
lifetime count: thousands of requests a read from idle pods, said only as INFO "ModelMesh restarted". A host that
resolves to another address stops the start (`test_exporter_own_pod_url_start`); a name that does not resolve at
start (the pod's DNS not up yet) is told at the first read that finds it resolving: from there the reads are
refused, the collector failing with one ERROR, nothing counted.
"""

from __future__ import annotations

import functools
import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.own_pod_url import check_url
from tests.exporter.conftest import Clock
from tests.exporter.modelmesh_wire import CLUSTER_IP, SERVICE_HOST, ClusterDns, MetricsPort, ModelMeshContainer

INTERVAL_S = 5.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def idle_pod(clock: Clock, served: float) -> ModelMeshContainer:
    """A runtime pod's ModelMesh that served `served` requests in its life and serves none now."""
    container = ModelMeshContainer(clock)
    container.serve(served)
    container.publish(models=8, lru_time_s=clock.now - 100.0)
    return container


async def read_through(dns: ClusterDns, pods: list[ModelMeshContainer], caplog: pytest.LogCaptureFixture,
                       clock: Clock) -> list[Samples]:
    """An exporter whose `--modelmesh-url` names the Service, started before the pod's DNS answers: four reads
    while it does not, then sixty (five minutes) with kube-proxy sending each to one of `pods` in turn. What
    /metrics served after each read, as a scraper reads it."""
    port = MetricsPort(pods[0])
    await port.up()
    url = f"http://{SERVICE_HOST}:{port.port}/metrics"
    assert check_url(url, dns.check_resolve).unresolved is not None  # as at start: not refused, told later
    health = CollectorHealth(clock=clock)
    collector = ModelMeshCollector(health, url, ssl_context=False, clock=clock, wall_clock=clock,
                                   url_check=functools.partial(check_url, url, dns.check_resolve))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    registry.register(health)
    served: list[Samples] = []
    try:
        async with dns.session() as session:
            with caplog.at_level(logging.INFO, logger="exporter"):
                for read in range(64):
                    dns.up = read >= 4
                    port.container = pods[read % len(pods)]
                    clock.now += INTERVAL_S
                    await collector.scrape_once(session)
                    text = generate_latest(registry).decode()
                    served.append({(s.name, tuple(sorted(s.labels.items()))): s.value
                                   for family in text_string_to_metric_families(text) for s in family.samples})
    finally:
        await port.down()
    return served


def modelmesh_errors(samples: Samples, reason: str) -> float:
    return samples.get((names.SCRAPE_ERRORS_TOTAL, (("collector", "modelmesh"), ("reason", reason))), 0.0)


async def test_reads_through_the_service_are_refused_once_its_name_resolves_and_count_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    served = await read_through(ClusterDns(), [idle_pod(clock, 5000.0), idle_pod(clock, 10000.0)], caplog, clock)

    assert all((names.REQUESTS_TOTAL, ()) not in samples for samples in served), "nothing read is counted"
    last = served[-1]
    assert last[(names.COLLECTOR_SUCCESS, (("collector", "modelmesh"),))] == 0.0
    assert modelmesh_errors(last, names.REASON_CONNECT) == 64  # 4 unresolved, then 60 refused
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    [line] = errors
    for said in ("--modelmesh-url (EXPORTER_MODELMESH_URL)", SERVICE_HOST, CLUSTER_IP, "Service",
                 "whole history", "https://127.0.0.1:2112/metrics"):
        assert said in line, (said, line)
    assert not [r for r in caplog.records if "ModelMesh restarted" in r.getMessage()]


async def test_a_name_that_resolves_to_this_pod_once_dns_answers_is_read(caplog: pytest.LogCaptureFixture) -> None:
    """The check refuses only addresses of other pods: a name the DNS gives as this pod's loopback is read as the
    default URL is, once it resolves."""
    dns = ClusterDns()
    dns.addresses = ["127.0.0.1"]
    clock = Clock()
    served = await read_through(dns, [idle_pod(clock, 5000.0)], caplog, clock)

    assert served[-1][(names.COLLECTOR_SUCCESS, (("collector", "modelmesh"),))] == 1.0
    assert (names.REQUESTS_TOTAL, ()) in served[-1]
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]
