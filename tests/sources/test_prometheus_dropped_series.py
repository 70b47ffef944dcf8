"""`--source prometheus` where Prometheus stops having one signal's series while it still has the pods' others (a
metric_relabel_configs rule dropping `modelmesh_pod_requests_per_second`, reviewer's report): desired replicas were
held, rightly, but nothing named the series or Prometheus. The log said only `requests missing on 2 of 2 ready pods`
and /debug's `source.problems` was empty. Now once the pods have lacked it for `max_staleness_s` (an exporter
restarted publishes its rates again from its second read), each is an `unseen` problem naming the series and one
WARNING names the series, the pods and the likely causes; an INFO line says when it is back.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN
from exporter import names
from tests.fakes.prometheus import create_blocks, openmetrics_text
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals

STALE_S = RuntimePolicy().max_staleness_s
PODS = ("a-1", "a-2")
RPS = "modelmesh_pod_requests_per_second"

pytestmark = pytest.mark.slow


def scrape(at: float, *, rps: bool) -> list:  # type: ignore[type-arg]
    """One scrape at `at` of both pods, with or without their request rates."""
    values = signals(10, 0.01, 0.1, 0.5, 2)
    if not rps:
        del values[names.REQUESTS_PER_SECOND]
    return [sample for pod in PODS for sample in exporter_series(TRITON.namespace, pod, at, values, last_success=at)]


def warnings_and_infos(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.INFO]


async def test_a_signal_series_prometheus_stops_having_is_named_with_its_likely_causes(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float, tmp_path: Path) -> None:
    before = now - AGE_S - 2
    prom = await start_prometheus(scrape(before, rps=True))
    source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): list(PODS)}), prom.url)
    sources.append(source)
    url = prom.url.rstrip("/")
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        await source.collect(now)
        assert source.problems(TRITON) == ()

        # The relabelling rule reloaded: the next scrapes keep every series but the request rate.
        await prom.stop()
        prom.tsdb_dir = create_blocks(openmetrics_text(scrape(before, rps=True) + scrape(now - AGE_S, rps=False)),
                                      tmp_path / "dropped")
        await prom.start()
        caplog.clear()
        await source.collect(now + 1)
        assert source.problems(TRITON) == ()  # not yet: an exporter restarted in its pod
        assert not any(RPS in line for line in warnings_and_infos(caplog)), caplog.text

        caplog.clear()
        await source.collect(now + STALE_S + 1)
        problems = source.problems(TRITON)
        assert sorted((problem.reason, problem.pod) for problem in problems) == [
            (REASON_UNSEEN, "a-1"), (REASON_UNSEEN, "a-2")], problems
        assert all(RPS in problem.detail and url in problem.detail for problem in problems), problems
        [line] = [line for line in warnings_and_infos(caplog) if RPS in line]
        assert url in line and "2 pods: team-a/a-1, team-a/a-2" in line, line
        assert "metric_relabel_configs" in line and "exporter" in line, line

        caplog.clear()
        await source.collect(now + STALE_S + 2)
        assert not any(RPS in line for line in warnings_and_infos(caplog)), caplog.text  # once

        # The rule taken out: the series is back, and the log says so.
        await prom.stop()
        prom.tsdb_dir = create_blocks(openmetrics_text(scrape(before, rps=True) + scrape(now - AGE_S + 1, rps=True)),
                                      tmp_path / "back")
        await prom.start()
        caplog.clear()
        await source.collect(now + STALE_S + 3)
        assert source.problems(TRITON) == ()
        [back] = [line for line in warnings_and_infos(caplog) if RPS in line]
        assert "again" in back, back
