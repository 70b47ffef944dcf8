"""`--source prometheus` while Prometheus dies and comes back, as `kubectl get --raw` and the probes show it: real
exporters scraped by a real Prometheus, the adapter reading it.

While Prometheus is down the value is unknown (503, the HPA holds), the message says why in one sentence, and the
adapter stays Ready and live (the APIService stays Available: a failing external-metrics APIService breaks
discovery for every kubectl in the cluster). Once Prometheus is back (same TSDB, as a restarted pod with its
volume), the value comes back where it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, http_get, poll

pytestmark = pytest.mark.slow


async def until(check: Callable[[], object], timeout: float) -> object:
    return await asyncio.to_thread(poll, check, timeout)


async def test_a_dead_prometheus_is_one_clear_503_and_the_adapter_stays_available(tmp_path: Path) -> None:
    port = free_port()
    with data_path_running(
        tmp_path, pods=2, rps=130, policy={"target_rps_per_pod": 100},
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}",
                      "--prometheus-timeout", "1"],
    ) as path:
        prometheus = PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                      workdir=tmp_path / "prometheus")
        async with prometheus:
            # 2 pods x 130 req/s at 100 per pod: 2.6, so 3.
            await until(lambda: path.value("modelmesh_desired_replicas") == 3.0, timeout=60)

            await prometheus.kill()
            message = str(await until(
                lambda: (lambda served: served[1] if served[0] != 0 else None)(
                    path.served("modelmesh_desired_replicas")), timeout=30))
            assert "ServiceUnavailable" in message, message
            assert "metric source down" in message, message
            # One sentence for the HPA's event: the reason once, not "HPA holds; the HPA holds ...".
            assert message.count("HPA holds") == 1, message

            deadline = time.monotonic() + 12  # past the stall watch's shortest limit (10 s)
            while time.monotonic() < deadline:
                assert http_get(f"{path.adapter_url}/readyz")[0] == 200
                assert http_get(f"{path.adapter_url}/livez")[0] == 200
                await asyncio.sleep(1)

            await prometheus.start()
            await until(lambda: path.value("modelmesh_desired_replicas") == 3.0, timeout=60)
