"""The adapter's /metrics says which process runs and since when, and how old the values it serves are.

Seen on call: the adapter's /metrics had no `process_*` series, so restarts and a crash loop were invisible to
Prometheus; and with its refresh process stopped (SIGSTOP: hung), /metrics went on saying `leader 1` and
`runtime_values_known 1`, the refresh's last words, with nothing on the page growing. Now `process_*` are the
main process's (the refresh process, the container's PID 1, whose start is the container's), read live by the
worker that answers, and `modelmesh_autoscaler_values_age_seconds` is the age of the values served, at the scrape.
A real `serve` with the real exporters and fake ModelMesh of the data path.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import data_path_running
from tests.e2e.test_hung_refresh import refresh_process
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow

AGE = "modelmesh_autoscaler_values_age_seconds"
STALL_LIMIT = "modelmesh_autoscaler_values_stall_limit_seconds"


def samples(adapter_url: str) -> dict[str, float]:
    """The unlabelled samples of the adapter's /metrics, by name."""
    code, text = http_get(adapter_url + "/metrics")
    assert code == 200, text
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if not sample.labels}


def started_at(pid: int) -> float:
    """When `pid` started, in Unix seconds, as /proc says (what `process_start_time_seconds` reads)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
    boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("workers", ["1", "0"])
def test_process_series_are_the_main_process_and_the_values_age_is_served(tmp_path: Path, workers: str) -> None:
    """With the age, the limit past which this replica calls its values stalled (503, /livez failing), which
    ModelMeshAutoscalerRefreshStalled measures the age against: --max-staleness 20 plus one --refresh-interval (1)."""
    with data_path_running(tmp_path, adapter_args=["--workers", workers, "--max-staleness", "20"]) as path:
        poll(lambda: path.value("modelmesh_request_load"), timeout=30)
        page = samples(path.adapter_url)
        main = refresh_process(path.adapter_url)
        assert abs(page["process_start_time_seconds"] - started_at(main)) < 1.0, page
        assert page["process_resident_memory_bytes"] > 0 and page["process_open_fds"] > 0, page
        assert 0 <= page[AGE] < 5, page
        assert page[STALL_LIMIT] == 21.0, page


def test_a_hung_refresh_shows_as_the_values_age_growing(tmp_path: Path) -> None:
    with data_path_running(tmp_path, adapter_args=["--workers", "1"]) as path:
        poll(lambda: path.value("modelmesh_request_load"), timeout=30)
        assert samples(path.adapter_url)[AGE] < 5
        pid = refresh_process(path.adapter_url)
        os.kill(pid, signal.SIGSTOP)
        try:
            poll(lambda: samples(path.adapter_url)[AGE] > 6 or None, timeout=30)
            assert samples(path.adapter_url)["process_start_time_seconds"] > 0  # read live, the process stopped
        finally:
            os.kill(pid, signal.SIGCONT)
        poll(lambda: samples(path.adapter_url)[AGE] < 5 or None, timeout=30)
