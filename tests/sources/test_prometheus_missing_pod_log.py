"""With `--source prometheus`, a Ready pod Prometheus has no series for while it has them for the runtime's other
pods: the log said only `1 of 10 ready pods stale; holding values`, and `source.problems` was empty, where the scrape
source names the pod, its URL and why. The pod is now named once it is stale (`max_staleness_s`, as the runtime's
line counts it), once, with Prometheus's URL and what to check; an `unseen` problem of the pod in /debug from the
first answer without it; and a line when it has series again. Many such pods are one line naming the first ten.
"""

from __future__ import annotations

import logging

import pytest

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals

STALE_S = RuntimePolicy().max_staleness_s


async def refreshes(start_prometheus: StartPrometheus, sources: list[PrometheusSource], pods: list[str],
                    scraped: int, now: float, caplog: pytest.LogCaptureFixture,
                    ages: tuple[float, ...]) -> tuple[PrometheusSource, list[list[str]], str]:
    """The source's lines at each refresh, `ages` after `now`, of a runtime of `pods`, Prometheus having series for
    the first `scraped` of them; and Prometheus's URL."""
    at = now - AGE_S
    prom = await start_prometheus([sample for pod in pods[:scraped] for sample in exporter_series(
        TRITON.namespace, pod, at, signals(10, 0.01, 0.1, 0.5, 2), last_success=at)])
    source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): pods}), prom.url)
    sources.append(source)
    said = []
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        for age in ages:
            caplog.clear()
            await source.collect(now + age)
            said.append([record.getMessage() for record in caplog.records
                         if "modelmesh_exporter_last_success_timestamp_seconds series" in record.getMessage()
                         or "series again" in record.getMessage()])
    return source, said, prom.url.rstrip("/")


@pytest.mark.slow
async def test_a_ready_pod_prometheus_has_no_series_for_is_named_once_it_is_stale(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    source, said, url = await refreshes(start_prometheus, sources, ["a-1", "a-2", "a-3"], 2, now, caplog,
                                        (0, STALE_S / 2, STALE_S, STALE_S + 15))

    assert said[0] == said[1] == [], said  # a new pod is not scraped for a scrape interval or two
    [line] = said[2]
    assert "team-a/a-3" in line and url in line and "a-1" not in line, line
    assert said[3] == [], said  # once
    [problem] = source.problems(TRITON)
    assert (problem.reason, problem.pod, problem.since) == (REASON_UNSEEN, "a-3", now), problem
    assert url in problem.detail, problem.detail


@pytest.mark.slow
async def test_many_such_pods_are_one_line_naming_the_first_ten(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    pods = [f"a-{i:02d}" for i in range(14)]
    source, said, _ = await refreshes(start_prometheus, sources, pods, 1, now, caplog, (0, STALE_S))

    [line] = said[1]
    assert "13 pods: team-a/a-01, team-a/a-02" in line and "team-a/a-10 and 3 more" in line, line
    assert len(source.problems(TRITON)) == 13
