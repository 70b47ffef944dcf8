"""A gap neither lowers nor raises what is served (docs/design.md, Missing data), seen through the real adapter and
`kubectl get --raw`: fake ModelMesh → real exporters with fake NVML → the adapter scraping them.

Was (an operator's review at 257aecb7, 200 fake exporters): the exporters of 9 idle pods of 20 stopped for 30 s
and `modelmesh_gpu_busy` went 361m → 405m at once, the power mean taken over the 11 pods still read; once they
were back it fell at the slow-fall rate (399m 43 s later), so an HPA on it scaled up on an exporter outage, not
on load. Values are computed by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import fake_gpus, served_over
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow

HOT_AND_IDLE = [95, 30, 30, 30]
"""Pod 0 hot, the others idle: M2 = sqrt((0.95² + 3 x 0.3²) / 4) = 0.5414."""


def gpu_states(path: DataPath) -> dict[str, str]:
    """Each pod's GPU signal state in /debug; {} before the first refresh."""
    status, body = http_get(f"{path.adapter_url}/debug/runtimes/default/{DEPLOYMENT}")
    if status != 200:
        return {}
    return {pod["name"]: dict(pod["signals"])["gpu"] for pod in json.loads(body)["pods"]}


def near(values: list[float | str], expected: float) -> bool:
    return bool(values) and all(isinstance(v, float) and abs(v - expected) <= 0.012 for v in values)


def test_idle_pods_exporters_gone_and_back_move_gpu_busy_only_with_the_fresh_pods(tmp_path: Path) -> None:
    gpus = fake_gpus(tmp_path, HOT_AND_IDLE)
    with data_path_running(tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 300}) as path:
        poll(lambda: (v := path.value("modelmesh_gpu_busy")) is not None and abs(v - 0.5414) < 0.012, timeout=40)
        before = poll(lambda: path.value("modelmesh_desired_replicas"), timeout=10)

        for pod in (2, 3):  # two idle pods' exporters stop: connection refused (2 of 4 fresh: coverage 0.5)
            path.kill_exporter(pod)
        poll(lambda: gpu_states(path).get("pod-3") == "stale" and gpu_states(path).get("pod-2") == "stale",
             timeout=15)
        # Over the two pods still read alone, M2(0.95, 0.3) = 0.7045: a rise made by the gap.
        during = served_over(path, "modelmesh_gpu_busy", 3)
        assert near(during, 0.5414), during
        desired = served_over(path, "modelmesh_desired_replicas", 1)
        assert desired and all(v == before for v in desired), (before, desired)

        # A real change of a fresh pod still moves it: pod 1 at 60%, M2(0.95, 0.6, 0.3, 0.3) = 0.6005 (over the
        # fresh pods alone 0.7945).
        gpus[1].set_gpu(0, util=60)
        poll(lambda: (v := path.value("modelmesh_gpu_busy")) is not None and v > 0.59, timeout=15)
        assert near(served_over(path, "modelmesh_gpu_busy", 2), 0.6005)

        for pod in (2, 3):
            path.restart_exporter(pod)
        poll(lambda: set(gpu_states(path).values()) == {"fresh"}, timeout=20)
        # Back: no step down either (a held 0.7945 would fall from there at the slow-fall rate).
        after = served_over(path, "modelmesh_gpu_busy", 3)
        assert near(after, 0.6005), after
        desired = served_over(path, "modelmesh_desired_replicas", 1)
        assert desired and all(isinstance(v, float) and v >= before for v in desired), (before, desired)
