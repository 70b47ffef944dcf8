"""A real Prometheus that refuses the adapter's queries for their size (`--query.max-samples`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autoscaler.sources.prometheus import PrometheusSource
from tests.fakes.prometheus import PrometheusServer, create_blocks, openmetrics_text
from tests.sources.test_prometheus_source import by_pod, cluster_samples, discovery

pytestmark = pytest.mark.slow


async def test_a_query_refused_for_too_many_samples_is_named_with_the_flag_that_fixes_it(
    tmp_path: Path, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture, now: float
) -> None:
    """The log said `HTTP 422 from URL/api/v1/query: execution: query processing would load too many samples
    ...`: neither which query nor what to change. It now names the query's signal, Prometheus's
    --query.max-samples, and --namespaces, which narrows the queries (tests/sources/test_prometheus_namespaces.py)."""
    tsdb = create_blocks(openmetrics_text(cluster_samples(now)), tmp_path / "tsdb")
    async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path, extra_args=["--query.max-samples=3"]) as prom:
        source = PrometheusSource(discovery(), prom.url)
        sources.append(source)
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
            snapshots = await source.collect(now)

    assert not any(snapshot.source_ok for snapshot in snapshots)
    assert by_pod(snapshots)["team-a", "a-1"].requests_per_second is None  # nothing read, nothing made up
    (line,) = caplog.messages
    assert "HTTP 422" in line and "too many samples" in line
    assert "the sampled_at query" in line  # the first of the round's queries, each refused alike
    assert "raise --query.max-samples on Prometheus, or give the adapter --namespaces" in line
