"""The scrape-interval hint of `--source prometheus` after the interval changes: a reviewer's adapter measured the
right 5 s at a Prometheus restart, then Prometheus was given `scrape_interval: 30s` (over `max_staleness_s`), and
for 10+ minutes the HPA got 503s every interval with no "samples are N s apart" line: the check had run once, for
the run. An adapter started 3 minutes after the change said nothing either: the median over 10 minutes of samples
was still the old 5 s. Now the check runs again while rounds show stale pods (at most every 5 minutes), on the
newest samples, and says each new finding once.

A real Prometheus scrapes a real HTTP target, restarted on its TSDB with a longer interval, as a reload does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import aiohttp
import pytest

from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.fakes.prometheus import PrometheusServer
from tests.sources.test_prometheus_lookback_recheck import AiohttpServer, exporter_target
from tests.sources.test_prometheus_probe_backends import warnings
from tests.sources.test_prometheus_source import discovery

MAX_STALENESS_S = 2.0
"""The default policy's: over a 1 s interval, under a 3 s one."""


async def until_samples(prometheus_url: str, count: int, since: float) -> None:
    """Wait until Prometheus holds `count` scrapes of the pod's signals taken after `since` (Unix time)."""
    async with aiohttp.ClientSession() as session:
        while True:
            query = f"count_over_time({names.MODELS_LOADED}[{max(1, int(time.time() - since))}s])"
            async with session.get(f"{prometheus_url}/api/v1/query", params={"query": query}) as answer:
                result = (await answer.json())["data"]["result"]
            if result and float(result[0]["value"][1]) >= count:
                return
            await asyncio.sleep(0.5)


def spacing_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = [line for line in warnings(caplog) if "apart" in line]
    caplog.clear()
    return said


async def test_a_scrape_interval_raised_over_max_staleness_is_said_after_an_earlier_check_found_it_fine(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    target = await exporter_target(aiohttp_server, [True])
    sources: list[PrometheusSource] = []
    async with PrometheusServer([target], scrape_interval="1s", workdir=tmp_path) as prom:
        try:
            started = time.time()
            await until_samples(prom.url, 14, started)
            earlier = PrometheusSource(discovery(), prom.url, max_staleness_s=MAX_STALENESS_S)
            sources.append(earlier)
            with caplog.at_level(logging.WARNING):
                checked_at = time.time() + 60  # a refresh that finds the pod's sample stale
                await earlier.collect(checked_at)
                at_one_second = spacing_lines(caplog)

                await prom.stop()  # its TSDB kept: as a reload with `scrape_interval: 3s`
                prom._scrape_interval = "3s"
                await prom.start()
                restarted = time.time()
                await until_samples(prom.url, 7, restarted)

                await earlier.collect(checked_at + 400)  # the same adapter, minutes later, still stale
                after_change = spacing_lines(caplog)
                await earlier.collect(checked_at + 1200)  # and later again: nothing new to say
                again = spacing_lines(caplog)

                later = PrometheusSource(discovery(), prom.url, max_staleness_s=MAX_STALENESS_S)
                sources.append(later)
                await later.collect(time.time() + 60)  # an adapter started after the change
                started_after = spacing_lines(caplog)
        finally:
            for source in sources:
                await source.close()

    assert at_one_second == [], at_one_second
    [hint] = after_change
    assert "the exporters' samples are 3 s apart (those of team-a/a-1)" in hint, hint
    assert "--max-staleness 6" in hint, hint
    assert again == [], again
    [hint] = started_after
    assert "the exporters' samples are 3 s apart" in hint, hint
