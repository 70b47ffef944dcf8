"""`--source prometheus` after a Prometheus restart, as `kubectl get --raw` shows it: real exporters scraped by a
real Prometheus, the adapter reading it (reviewer's exp_restart).

Two pods with full caches and an LRU copy 900 s old: cache pressure 0.667. Prometheus stops; meanwhile the LRU
copies are used (the exporter drops `modelmesh_pod_lru_age_seconds`, the worst thrash); Prometheus starts again on
its TSDB. The restart writes no staleness marker for the dropped series, so its 900 s sample stayed visible for the
whole lookback while the pods read as fresh: 0.667 was served for that long (58 s at a 60 s lookback, 5 minutes
at the default). The newest scrape has no LRU age, and the value served is the scrape source's: 600.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, poll

pytestmark = pytest.mark.slow

THRASH_PRESSURE = 600.0
"""The cache pressure served for full caches whose LRU copy was just used (what the scrape source serves)."""


async def until(check: Callable[[], object], timeout: float) -> object:
    return await asyncio.to_thread(poll, check, timeout)


async def test_an_lru_age_dropped_across_a_prometheus_restart_is_not_served_from_before_it(tmp_path: Path) -> None:
    port = free_port()
    with data_path_running(
        tmp_path, pods=2, rps=50, policy={"target_rps_per_pod": 100, "scale_down_tau_s": 1},
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}",
                      "--max-staleness", "10"],
    ) as path:
        for pod in (0, 1):
            path.set_load(pod, cache_used_ratio=0.95, lru_age_s=900.0, lru_time_published=False)
        # The default lookback: the old sample would be served for 5 minutes, far past the wait below.
        prometheus = PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                      workdir=tmp_path / "prometheus")
        async with prometheus:
            await until(lambda: (value := path.value("modelmesh_cache_pressure")) is not None
                        and abs(value - 0.667) < 0.01, timeout=60)
            await prometheus.stop()
            for pod in (0, 1):
                path.set_load(pod, lru_age_s=0.0)  # the LRU copy just used: the exporter drops the age series
            await prometheus.start()

            # Before the fix it stayed 0.667 until the 900 s sample left the lookback: this wait ran out.
            await until(lambda: path.value("modelmesh_cache_pressure") == THRASH_PRESSURE, timeout=60)
