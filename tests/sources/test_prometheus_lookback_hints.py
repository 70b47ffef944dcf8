"""What `--source prometheus` says when Prometheus cannot keep a pod's series in every answer, through the real CLI
flags and a real Prometheus: its `--query.lookback-delta` shorter than the exporters' scrape interval (an instant
query between two scrapes finds nothing), or a scrape interval longer than `max_staleness_s` (every pod turns stale
before its next scrape). Pods flickered absent or stale and the log said only, from the first round, "is
Prometheus scraping the exporters?", which it was.

The data is backfilled (promtool) one scrape a minute; Prometheus reads it as it would have scraped it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from exporter import names
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.sources.test_prometheus_probe_backends import warnings
from tests.sources.test_prometheus_source import discovery, exporter_series, signals


def scrapes_every(interval_s: float, newest_age_s: float, now: float) -> list[Sample]:
    """Ten minutes of scrapes, `interval_s` apart, of the Ready pods of `discovery()`; the newest `newest_age_s`
    old."""
    samples: list[Sample] = []
    for namespace, pod in (("team-a", "a-1"), ("team-a", "a-2"), ("team-b", "a-1"), ("team-b", "b-2")):
        at = now - newest_age_s
        while at > now - 600:
            samples += exporter_series(namespace, pod, at, signals(1, 0, 0, 0.5, 1), last_success=at)
            at -= interval_s
    return samples


async def said(tmp_path: Path, samples: Sequence[Sample], caplog: pytest.LogCaptureFixture,
               prometheus_args: Sequence[str] = (), refreshes_at: Sequence[float] = (0.0,)) -> list[str]:
    """The warnings of `serve --source prometheus`'s refreshes `refreshes_at` seconds from now against a
    Prometheus holding `samples` (and scraping nothing more meanwhile)."""
    tsdb = create_blocks(openmetrics_text(samples), tmp_path / "tsdb")
    async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path, extra_args=prometheus_args) as prom:
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", prom.url])
        source = build_source(settings_from_args(args, {}), discovery())
        try:
            with caplog.at_level(logging.WARNING):
                for later_s in refreshes_at:
                    await source.collect(time.time() + later_s)
        finally:
            await source.close()
    return list(warnings(caplog))


async def test_a_lookback_delta_shorter_than_the_scrape_interval_is_named_with_both_values_from_the_first_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = await said(tmp_path, scrapes_every(60, 40, time.time()), caplog, ["--query.lookback-delta=30s"])

    [hint] = [line for line in lines if "lookback" in line]
    assert "--query.lookback-delta 30 s" in hint and "60 s apart" in hint, hint
    assert "Start Prometheus with --query.lookback-delta=2m" in hint and "lookbackDelta" in hint, hint


async def test_a_scrape_interval_longer_than_max_staleness_is_named_with_both_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The default policy's max_staleness_s is 3 x --refresh-interval (15 s): 45 s. The first refresh reads every
    pod 10 s old, and asks nothing more; the third, 30 s later, reads the same scrapes, now 40 s old."""
    lines = await said(tmp_path, scrapes_every(60, 10, time.time()), caplog, refreshes_at=(0, 15, 40))

    [hint] = [line for line in lines if "max_staleness_s" in line]
    assert "60 s apart" in hint and "max_staleness_s of 45 s" in hint, hint
    assert "--max-staleness" in hint and "interval" in hint, hint
    assert not any("lookback" in line for line in lines), lines


async def test_scrapes_the_settings_keep_up_with_are_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The last refresh reads samples 50 s old (no scrape since), which has the spacing measured: 15 s."""
    lines = await said(tmp_path, scrapes_every(15, 5, time.time()), caplog, ["--query.lookback-delta=1m"],
                       refreshes_at=(0, 15, 45))

    assert lines == [], lines


async def test_a_lookback_delta_of_0s_is_read_as_the_5m_default_it_stands_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--query.lookback-delta=0s` is PromQL's default, 5m, to Prometheus: it was read as 0 s and the hint said to
    shorten the lookback to 30s."""
    lines = await said(tmp_path, scrapes_every(15, 5, time.time()), caplog, ["--query.lookback-delta=0s"],
                       refreshes_at=(0, 15, 45))

    assert not any("lookback" in line for line in lines), lines


async def test_a_lookback_delta_equal_to_the_scrape_interval_is_named_for_what_one_failed_scrape_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The newest scrape 70 s old, at a 60 s interval: one scrape failed, and a 1m lookback-delta finds no series
    until the next; the hint's twice-the-interval is what keeps them."""
    lines = await said(tmp_path, scrapes_every(60, 70, time.time()), caplog, ["--query.lookback-delta=1m"])

    [hint] = [line for line in lines if "lookback" in line]
    assert "--query.lookback-delta 60 s is shorter than twice" in hint and "60 s apart" in hint, hint
    assert "a scrape fails" in hint and "Start Prometheus with --query.lookback-delta=2m" in hint, hint


def exporter_only_job(job: str, interval_s: float, now: float) -> list[Sample]:
    """Ten minutes of a job that keeps only the exporter's own series of the pods of `discovery()` (a user's
    ServiceMonitor beside our PodMonitor), `interval_s` apart."""
    samples: list[Sample] = []
    for namespace, pod in (("team-a", "a-1"), ("team-a", "a-2"), ("team-b", "a-1"), ("team-b", "b-2")):
        labels = {"namespace": namespace, "pod": pod, "job": job, "instance": f"{pod}:9187",
                  "collector": names.COLLECTOR_MODELMESH}
        at = now - 1
        while at > now - 600:
            samples.append(Sample(names.LAST_SUCCESS_TIMESTAMP, labels, at, at))
            at -= interval_s
    return samples


@pytest.mark.parametrize("job", ["a-servicemonitor", "z-servicemonitor"])  # its series first, or ours
async def test_the_scrape_interval_said_is_the_signals_not_a_faster_exporter_only_jobs_beside_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, job: str
) -> None:
    """Our job scrapes the signals every 60 s, a user's job the exporter's own series every 5 s: the spacing was
    read from whichever success-time series came first, and the 5 s one hid the 60 s that makes pods stale."""
    now = time.time()
    lines = await said(tmp_path, scrapes_every(60, 10, now) + exporter_only_job(job, 5, now), caplog,
                       refreshes_at=(0, 15, 40))

    [hint] = [line for line in lines if "max_staleness_s" in line]
    assert "60 s apart" in hint, hint
