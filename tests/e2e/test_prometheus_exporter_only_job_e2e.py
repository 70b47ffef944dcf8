"""`--source prometheus` with a second job that keeps only the exporter's own series, as `/debug/runtimes` and
`kubectl get --raw` show it: a real exporter scraped by a real Prometheus, the adapter reading it.

Our job scrapes the exporter every 20 s (a PodMonitor at a long interval); a user's job scrapes it every second
but keeps only `modelmesh_exporter_.*` (a ServiceMonitor's metricRelabelings). The signals can only come from
our job's scrapes, so between them they age up to 20 s, past `--max-staleness 5`. The pod read as fresh as the
user's job's last scrape (about a second old) for good: signals up to the lookback old were served as fresh
instead of held, or 503 where too few pods are fresh.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, http_get, poll

pytestmark = pytest.mark.slow

MAX_STALENESS_S = 5.0
OUR_INTERVAL_S = 20
METRIC = "modelmesh_cache_pressure"

T = TypeVar("T")


async def until(check: Callable[[], T | None], timeout: float) -> T:
    return await asyncio.to_thread(poll, check, timeout)


def debug_pod(path: DataPath) -> dict[str, Any] | None:
    """pod-0 as `/debug/runtimes/default/DEPLOYMENT` shows it, with the runtime's `reason`; None before it has."""
    status, body = http_get(f"{path.adapter_url}/debug/runtimes/default/{DEPLOYMENT}")
    if status != 200:
        return None
    document = json.loads(body)
    pods = {pod["name"]: pod for pod in document.get("pods", [])}
    pod: dict[str, Any] | None = pods.get("pod-0")
    return None if pod is None else pod | {"reason": document.get("reason", "")}


def stale_and_refused(path: DataPath) -> tuple[dict[str, Any], str] | None:
    """pod-0 once `/debug` shows it stale (older than `--max-staleness`) and kubectl's error for the runtime's
    value at that moment; None before."""
    pod = debug_pod(path)
    if pod is None or pod["fresh"] or pod["age_s"] is None or pod["age_s"] <= MAX_STALENESS_S:
        return None
    code, said = path.served(METRIC)
    return None if code == 0 else (pod, str(said))


def exporter_only_job(exporter_url: str) -> dict[str, Any]:
    """A user's job beside ours: every second, keeping only the exporter's own series."""
    return {
        "job_name": "user-servicemonitor", "scrape_interval": "1s", "scrape_timeout": "1s", "honor_labels": True,
        "static_configs": [{"targets": [exporter_url.removeprefix("http://").removesuffix("/metrics")],
                            "labels": {"namespace": "default", "pod": "pod-0"}}],
        "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "modelmesh_exporter_.*",
                                    "action": "keep"}],
    }


async def test_signals_from_a_slow_job_turn_stale_though_an_exporter_only_job_scrapes_every_second(
    tmp_path: Path,
) -> None:
    port = free_port()
    with data_path_running(
        tmp_path, pods=1, rps=50, policy={"target_rps_per_pod": 100},
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}",
                      "--max-staleness", f"{MAX_STALENESS_S:g}"],
    ) as path:
        target = path.exporter_url.removeprefix("http://").removesuffix("/metrics")
        prometheus = PrometheusServer(
            path.exporter_urls, port=port, target_labels={target: {"namespace": "default", "pod": "pod-0"}},
            scrape_interval=f"{OUR_INTERVAL_S}s", extra_scrape_configs=[exporter_only_job(path.exporter_url)],
            workdir=tmp_path / "prometheus")
        async with prometheus:
            # Our job's first scrape (within its interval of Prometheus's first scrapes): values served.
            await until(lambda: path.value(METRIC) is not None, timeout=OUR_INTERVAL_S + 30)

            # Before the fix the pod stayed about a second old (the user's job's scrape) and this wait ran out.
            try:
                pod, message = await until(lambda: stale_and_refused(path), timeout=2 * OUR_INTERVAL_S)
            except AssertionError as error:
                raise AssertionError(f"pod-0 never read stale; /debug shows {debug_pod(path)}") from error
            assert "ServiceUnavailable" in message, message
            assert "only 0 of 1 ready pods fresh" in pod["reason"], pod
