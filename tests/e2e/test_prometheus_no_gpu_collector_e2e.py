"""`--source prometheus` with exporters started with `--no-gpu`, as /debug shows it: real exporters scraped by a
real Prometheus, the adapter reading it (reviewer's report).

The scrape source says each pod's GPU is `absent` and the runtime's reason `no ready pod has a GPU collector (its
exporter runs with --no-gpu)`; reading the same exporters through Prometheus said `none` and `no fresh pod reports
GPU busy`, though Prometheus holds the series that tell them apart (the exporter lists its collectors'
`modelmesh_exporter_collector_success`, and `collector="gpu"` is not among them). Now both say the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, poll

pytestmark = pytest.mark.slow


def gpu_states(document: dict[str, object]) -> list[str]:
    return [pod["signals"]["gpu"] for pod in document.get("pods") or []]  # type: ignore[attr-defined]


async def test_pods_whose_exporters_run_without_a_gpu_collector_have_their_gpu_absent(tmp_path: Path) -> None:
    port = free_port()
    with data_path_running(
        tmp_path, pods=2, rps=50,
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}"],
    ) as path:
        prometheus = PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                      workdir=tmp_path / "prometheus")
        async with prometheus:
            document: dict[str, object] = {}

            def both_fresh() -> bool:
                nonlocal document
                document = debug_runtime(path)
                return document.get("fresh_pods") == 2

            poll(both_fresh, timeout=60)
            assert gpu_states(document) == ["absent", "absent"], document
            assert "no ready pod has a GPU collector" in str(document["reason"]), document
