"""An absurd reading from one pod, seen through the real processes and `kubectl get --raw`, as the HPA and KEDA
read the adapter: fake ModelMesh → real exporters → the adapter (serving workers, as in a cluster).

A ModelMesh whose least recently used model reads 1e-320 s old (a subnormal float: finite, positive) with a
full cache makes `target_lru_age / 1e-320` infinite. The adapter once failed to render that, and its serving
workers kept the snapshot they had: every runtime's every value stayed frozen, served 200 with its old
timestamp, while the load changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, data_path_running
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow

ABSURD_CACHE = {"cache_used_ratio": 0.95, "lru_age_s": 1e-320}


def test_an_infinite_cache_pressure_is_unknown_and_the_other_values_follow_the_load(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=2, rps=50, policy={"target_rps_per_pod": 100}) as path:
        def load_above(floor: float) -> float | None:
            value = path.value("modelmesh_request_load")
            return value if value is not None and value > floor else None

        poll(lambda: load_above(0.0), timeout=30)
        for pod in (0, 1):
            path.set_load(pod, **ABSURD_CACHE)
        pressure = poll(lambda: path.served("modelmesh_cache_pressure")[1] if path.served(
            "modelmesh_cache_pressure")[0] != 0 else None, timeout=15)
        assert "ServiceUnavailable" in str(pressure), pressure  # unknown: an HPA on it holds

        for pod in (0, 1):  # 2 pods x 400/s: the HPA must see the load rise
            path.set_load(pod, requests_per_second=400)
        assert poll(lambda: load_above(700.0), timeout=20) <= 900
        poll(lambda: path.value("modelmesh_desired_replicas") == 8.0, timeout=10)  # 800/s over 100/s a pod

        status, body = http_get(f"{path.adapter_url}/keda/v1/namespaces/default/runtimes/{DEPLOYMENT}")
        document = json.loads(body)
        assert status == 200 and document["modelmesh_cache_pressure"] is None
        assert document["modelmesh_desired_replicas"] == 8.0
