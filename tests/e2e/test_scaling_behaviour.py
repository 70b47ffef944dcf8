"""The brain seen through the HTTPS API with kubectl: fast up, slow down, hold on gaps, 503 when blind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_missing_signal_e2e import served_over
from tests.support.processes import poll

pytestmark = pytest.mark.slow

POLICY = {"target_rps_per_pod": 100, "min_coverage": 0.5}


def test_load_step_up_is_served_at_once_and_step_down_slowly(tmp_path: Path) -> None:
    # 2 x 40 req/s fits one pod of 100 with room for measurement jitter.
    with data_path_running(tmp_path, pods=2, rps=40, policy={**POLICY, "scale_down_tau_s": 10}) as path:
        path.until_served("modelmesh_desired_replicas", lambda served: served == 1.0, timeout=30)

        path.set_load(pod=0, requests_per_second=400)
        # M2(400, 40) x 2 pods = 569 req/s: six pods of 100 (a plain mean would say five).
        path.until_served("modelmesh_desired_replicas", lambda served: (served or 0) >= 6, timeout=30)
        peak = path.value("modelmesh_request_load")
        assert peak is not None and peak > 500

        path.set_load(pod=0, requests_per_second=40)
        time.sleep(5)  # past the exporters' 3 s load window: their raw rates are back to 40 req/s
        first = path.value("modelmesh_request_load")
        assert first is not None and 200 < first < peak, (peak, first)  # far above the 80 they add up to now
        # ...and falling towards it: a later refresh serves less (a fixed 3 s window read equal values, or one
        # past 200, when a loaded machine stalled the refreshes)
        path.until_served("modelmesh_request_load", lambda served: (served or first) < first, timeout=30)
        assert (path.value("modelmesh_desired_replicas") or 0) > 1


def test_missing_exporter_holds_the_value_and_no_data_answers_503(tmp_path: Path) -> None:
    with data_path_running(
        tmp_path, pods=2, rps=100, policy={**POLICY, "scale_down_tau_s": 1},
        adapter_args=["--max-staleness", "3"],
    ) as path:
        path.until_served("modelmesh_request_load", lambda served: 180 < (served or 0) < 220, timeout=30)

        path.kill_exporter(1)
        time.sleep(4)  # pod-1's last sample is now older than --max-staleness
        path.set_load(pod=0, requests_per_second=10)
        for held in served_over(path, "modelmesh_request_load", 8):
            assert isinstance(held, float) and held >= 180, f"value fell to {held} while a pod's data was missing"

        path.kill_exporter(0)

        def refused() -> tuple[int, float | str] | None:
            answer = path.served("modelmesh_request_load")
            return answer if answer[0] != 0 else None

        poll(lambda: path.answered("modelmesh_request_load")[0] != 0, timeout=15)
        code, message = poll(refused, timeout=15)
        assert "ServiceUnavailable" in str(message) or "503" in str(message)
        code, message = path.served("modelmesh_desired_replicas")
        assert code != 0, "desired replicas must not be served without data"
