"""The decision core's promises seen through the real adapter process and `kubectl get --raw`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.support.processes import poll

pytestmark = pytest.mark.slow


def test_cpu_runtime_under_load_without_a_request_target_keeps_its_replicas(tmp_path: Path) -> None:
    """Was: no capacity term, min_replicas won, desired 1 for a loaded runtime (the HPA empties it)."""
    with data_path_running(tmp_path, pods=3, rps=400, policy={"scale_down_tau_s": 0}) as path:
        poll(lambda: path.value("modelmesh_desired_replicas") == 3.0, timeout=30)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert path.value("modelmesh_desired_replicas") == 3.0
            time.sleep(0.5)
        assert path.adapter_log().count("target_rps_per_pod is not set") == 1


def test_one_pod_with_a_constant_queue_does_not_ask_for_one_more_pod(tmp_path: Path) -> None:
    """Was: n + ceil(Σq/drain) = 5 for 4 pods at every refresh, walking the fleet up under an HPA."""
    with data_path_running(tmp_path, pods=4, rps=20, policy={"scale_down_tau_s": 0}) as path:
        path.set_load(pod=0, queue_delay_ms=200)
        poll(lambda: path.value("modelmesh_desired_replicas") == 4.0, timeout=30)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert path.value("modelmesh_desired_replicas") == 4.0
            time.sleep(0.5)
