"""An absurd reading from one pod, seen through the real processes and `kubectl get --raw`, as the HPA and KEDA
read the adapter: fake ModelMesh → real exporters → the adapter (serving workers, as in a cluster).

A ModelMesh whose least recently used model reads 1e-320 s old (a subnormal float: finite, positive) with a
full cache makes `target_lru_age / 1e-320` infinite. The adapter once failed to render that, and its serving
workers kept the snapshot they had: every runtime's every value stayed frozen, served 200 with its old
timestamp, while the load changed. And the smoothing memory, having risen to infinity, could never decay: the
cache pressure stayed infinite, unservable, after the readings were sane again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, data_path_running
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow


def test_an_infinite_cache_pressure_is_held_and_the_other_values_follow_the_load(tmp_path: Path) -> None:
    policy = {"target_rps_per_pod": 100, "scale_down_tau_s": 1}
    with data_path_running(tmp_path, pods=2, rps=50, policy=policy) as path:
        def near(metric: str, expected: float) -> bool:
            value = path.value(metric)
            return value is not None and abs(value - expected) < 0.01

        for pod in (0, 1):  # full caches, LRU 900 s: pressure 600 / 900. Read from ModelMesh's age gauge alone:
            # from its whole-second last-use time no age can be subnormal (nor exactly 900 s)
            path.set_load(pod, cache_used_ratio=0.95, lru_age_s=900.0, lru_time_published=False)
        poll(lambda: near("modelmesh_cache_pressure", 0.667), timeout=30)

        for pod in (0, 1):
            path.set_load(pod, lru_age_s=1e-320)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # held (or unknown): never another number
            code, served = path.served("modelmesh_cache_pressure")
            assert served == 0.667 or (code != 0 and "ServiceUnavailable" in str(served)), served

        for pod in (0, 1):  # 2 pods x 400/s: the HPA must see the load rise
            path.set_load(pod, requests_per_second=400)
        load = poll(lambda: (value := path.value("modelmesh_request_load")) is not None and value > 700 and value,
                    timeout=20)
        assert load <= 900
        poll(lambda: (path.value("modelmesh_desired_replicas") or 0) >= 8, timeout=10)  # 800/s over 100/s a pod
        status, body = http_get(f"{path.adapter_url}/keda/v1/namespaces/default/runtimes/{DEPLOYMENT}")
        document = json.loads(body)
        assert status == 200 and document["modelmesh_desired_replicas"] >= 8
        assert document["modelmesh_cache_pressure"] in (0.667, None)

        for pod in (0, 1):  # sane again, LRU 1200 s: the pressure falls to 600 / 1200
            path.set_load(pod, lru_age_s=1200.0)
        poll(lambda: near("modelmesh_cache_pressure", 0.5), timeout=15)
