"""An exporter that has not yet read ModelMesh twice (a new pod, a sidecar restarted) has no request rate yet: a
rate needs two reads. Seen as a platform engineer sees it: the adapter's log and its own `/metrics`. Fake ModelMesh
→ real exporters (`--no-gpu`, and on the fake NVML) → the adapter, scraping.

Was: at every such start the adapter logged `WARNING ... scrape of NS/DEPLOYMENT/POD failed (garbage): ... a
request rate that is NaN, infinite or negative, or missing ...`, then `recovered` once the second read came, and
counted `modelmesh_autoscaler_source_errors_total{reason="garbage"}` at every refresh between (feeding the
ModelMeshAutoscalerSourceErrors alert and the dashboard), for a healthy rollout. The pod is not fresh yet, as it
is before its first read: its values are held, said by nobody, counted by nothing.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import fake_gpus
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow

SLOW_MODELMESH = ["--modelmesh-interval", "6", "--load-window", "12"]
"""The exporter's second ModelMesh read 6 s after its first: six refreshes of the adapter (1 s) without a rate."""


def garbage_errors(path: DataPath) -> float:
    """The adapter's `source_errors_total{reason="garbage"}` as its /metrics shows it (0 when it has none)."""
    status, body = http_get(f"{path.adapter_url}/metrics")
    assert status == 200, body
    found = re.search(r'modelmesh_autoscaler_source_errors_total\{reason="garbage",source="scrape"\} (\S+)', body)
    return 0.0 if found is None else float(found[1])


def exporter_has_a_rate(path: DataPath) -> bool:
    status, body = http_get(path.exporter_url)
    return status == 200 and "\nmodelmesh_pod_requests_per_second " in body


@pytest.mark.parametrize("gpu", [False, True], ids=["no-gpu", "gpu"])
def test_an_exporter_before_its_second_modelmesh_read_is_not_garbage(tmp_path: Path, gpu: bool) -> None:
    gpus = fake_gpus(tmp_path, [50]) if gpu else None
    with data_path_running(tmp_path, pods=1, gpus=gpus, exporter_args=[SLOW_MODELMESH]) as path:
        poll(lambda: exporter_has_a_rate(path), timeout=30)  # the new pod's start, scraped at every refresh
        time.sleep(2)
        path.restart_exporter(0)  # the sidecar restarted: a new process, no rate until its second read
        assert not exporter_has_a_rate(path)
        poll(lambda: exporter_has_a_rate(path), timeout=30)
        time.sleep(2)  # a refresh or two that read the rate again

        said = [line for line in path.adapter_log().splitlines() if "autoscaler.sources.scrape" in line]
        assert not [line for line in said if "(garbage)" in line], said
        assert garbage_errors(path) == 0.0
