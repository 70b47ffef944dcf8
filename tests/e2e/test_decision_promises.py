"""The decision core's promises seen through the real adapter process and `kubectl get --raw`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_missing_signal_e2e import served_over

pytestmark = pytest.mark.slow


def test_cpu_runtime_under_load_without_a_request_target_keeps_its_replicas(tmp_path: Path) -> None:
    """Was: no capacity term, min_replicas won, desired 1 for a loaded runtime (the HPA empties it)."""
    with data_path_running(tmp_path, pods=3, rps=400, policy={"scale_down_tau_s": 0}) as path:
        path.until_served("modelmesh_desired_replicas", lambda served: served == 3.0, timeout=30)
        held = served_over(path, "modelmesh_desired_replicas", 4)
        assert all(served == 3.0 for served in held), held
        assert path.adapter_log().count("target_rps_per_pod is not set") == 1


def test_one_pod_with_a_constant_queue_does_not_ask_for_one_more_pod(tmp_path: Path) -> None:
    """Was: n + ceil(Σq/drain) = 5 for 4 pods at every refresh, walking the fleet up under an HPA."""
    with data_path_running(tmp_path, pods=4, rps=20, policy={"scale_down_tau_s": 0}) as path:
        path.set_load(pod=0, queue_delay_ms=200)
        path.until_served("modelmesh_desired_replicas", lambda served: served == 4.0, timeout=30)
        held = served_over(path, "modelmesh_desired_replicas", 4)
        assert all(served == 4.0 for served in held), held
