"""A gap neither lowers nor raises what is served (docs/design.md, Missing data), seen through the real adapter and
`kubectl get --raw`: fake ModelMesh → real exporters with fake NVML → the adapter scraping them.

Was (an operator's review at 257aecb7, 200 fake exporters): the exporters of 9 idle pods of 20 stopped for 30 s
and `modelmesh_gpu_busy` went 361m → 405m at once, the power mean taken over the 11 pods still read; once they
were back it fell at the slow-fall rate (399m 43 s later), so an HPA on it scaled up on an exporter outage, not
on load. Values are computed by hand in the comments.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import fake_gpus, served_over, until
from tests.fakes.nvml import GPU_IS_LOST
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, http_get, poll

pytestmark = pytest.mark.slow

HOT_AND_IDLE = [95, 30, 30, 30]
"""Pod 0 hot, the others idle: M2 = sqrt((0.95² + 3 x 0.3²) / 4) = 0.5414."""


def settled(path: DataPath, metric: str) -> float:
    """`metric` once it has held one value for 2 s: the first value served was read as the one before the change
    while the load windows still filled (4, then 3 with every GPU fresh, on a loaded CI machine), and its settling
    was taken for the fall the test forbids."""
    def steady() -> float | None:
        seen = served_over(path, metric, 2)
        return float(seen[0]) if len(set(seen)) == 1 and isinstance(seen[0], float) and seen[0] else None
    return poll(steady, timeout=40)


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
        path.until_served("modelmesh_gpu_busy", lambda v: v is not None and abs(v - 0.5414) < 0.012, timeout=40)
        before = settled(path, "modelmesh_desired_replicas")
        assert before is not None

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
        path.until_served("modelmesh_gpu_busy", lambda v: v is not None and v > 0.59, timeout=15)
        assert near(served_over(path, "modelmesh_gpu_busy", 2), 0.6005)

        for pod in (2, 3):
            path.restart_exporter(pod)
        poll(lambda: set(gpu_states(path).values()) == {"fresh"}, timeout=20)
        # Back: no step down either (a held 0.7945 would fall from there at the slow-fall rate).
        after = served_over(path, "modelmesh_gpu_busy", 3)
        assert near(after, 0.6005), after
        desired = served_over(path, "modelmesh_desired_replicas", 1)
        assert desired and all(isinstance(v, float) and v >= before for v in desired), (before, desired)


def test_idle_pods_gpu_failing_and_back_moves_gpu_busy_only_with_the_fresh_pods(tmp_path: Path) -> None:
    """A gap in one signal of a pod still read: its exporter's GPU collector fails (NVML says the GPU is lost) while
    its ModelMesh collector works. Was: the pod's GPU left the power mean, M2(0.95, 0.3, 0.3) = 0.6007 at once, and
    after the GPU was back it fell at the slow-fall rate."""
    gpus = fake_gpus(tmp_path, HOT_AND_IDLE)
    with data_path_running(tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 300}) as path:
        path.until_served("modelmesh_gpu_busy", lambda v: v is not None and abs(v - 0.5414) < 0.012, timeout=40)
        before = settled(path, "modelmesh_desired_replicas")

        gpus[3].set_gpu(0, error=GPU_IS_LOST)  # an idle pod's GPU collector fails; its load signals stay fresh
        poll(lambda: gpu_states(path).get("pod-3") not in (None, "fresh"), timeout=15)
        during = served_over(path, "modelmesh_gpu_busy", 3)
        assert near(during, 0.5414), during
        assert gpu_states(path)["pod-3"] == "stale"  # held at its last reading, still not fresh: values hold
        desired = served_over(path, "modelmesh_desired_replicas", 1)
        assert desired and all(v == before for v in desired), (before, desired)

        gpus[3].set_gpu(0, error=0, util=30)  # the GPU answers again (NVML re-initialised within its backoff)
        poll(lambda: set(gpu_states(path).values()) == {"fresh"}, timeout=30)
        after = served_over(path, "modelmesh_gpu_busy", 3)
        assert near(after, 0.5414), after


def test_a_gpu_reading_gone_is_missing_at_once_so_nothing_falls_meanwhile(tmp_path: Path) -> None:
    """A reviewer: with a pod's kept GPU busy taken as fresh until `max_staleness`, the hot pod cooling (95% to
    30%) as an idle pod's GPU was lost lowered `modelmesh_gpu_busy` to 0.366 then 0.3, and the replicas from 4 to
    2, within 2 s, while /debug showed that pod's GPU fresh. DESIGN §6: a signal absent while the pod reported it
    before is missing, and what uses it may rise but not fall: held at 0.5414 until the GPU is back."""
    gpus = fake_gpus(tmp_path, HOT_AND_IDLE)
    with data_path_running(tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 0},
                           adapter_args=["--max-staleness", "20"]) as path:
        path.until_served("modelmesh_gpu_busy", lambda v: v is not None and abs(v - 0.5414) < 0.012, timeout=40)
        before = settled(path, "modelmesh_desired_replicas")

        gpus[3].set_gpu(0, error=GPU_IS_LOST)
        gpus[0].set_gpu(0, util=30)  # a real fall, while pod-3's GPU is missing: M2 of four 0.3 = 0.3
        poll(lambda: gpu_states(path).get("pod-3") not in (None, "fresh"), timeout=15)
        assert gpu_states(path)["pod-3"] == "stale", gpu_states(path)  # its last reading: missing now
        during = served_over(path, "modelmesh_gpu_busy", 4)
        assert near(during, 0.5414), during
        desired = served_over(path, "modelmesh_desired_replicas", 1)
        assert desired and all(v == before for v in desired), (before, desired)

        gpus[3].set_gpu(0, error=0, util=30)  # back: every GPU read fresh, and the fall is served (tau 0)
        path.until_served("modelmesh_gpu_busy", lambda v: v is not None and abs(v - 0.3) < 0.012, timeout=30)


async def test_idle_pods_gpu_failing_in_prometheus_mode_moves_gpu_busy_only_with_the_fresh_pods(
        tmp_path: Path) -> None:
    """The same through a real Prometheus: the GPU query drops a pod whose exporter says its GPU collector fails.
    Was: 0.601 at once, as scraping."""
    port = free_port()
    gpus = fake_gpus(tmp_path, HOT_AND_IDLE)
    with data_path_running(
        tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 300},
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}",
                      "--max-staleness", "10"],
    ) as path:
        async with PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                    workdir=tmp_path / "prometheus"):
            await asyncio.to_thread(path.until_served, "modelmesh_gpu_busy",
                                    lambda v: v is not None and abs(v - 0.5414) < 0.012, 60)

            gpus[3].set_gpu(0, error=GPU_IS_LOST)
            await until(lambda: gpu_states(path).get("pod-3") not in (None, "fresh"), timeout=30)
            during = await asyncio.to_thread(served_over, path, "modelmesh_gpu_busy", 3)
            assert near(during, 0.5414), during
            assert gpu_states(path)["pod-3"] == "stale"

            gpus[3].set_gpu(0, error=0, util=30)
            await until(lambda: set(gpu_states(path).values()) == {"fresh"}, timeout=40)
            after = await asyncio.to_thread(served_over, path, "modelmesh_gpu_busy", 3)
            assert near(after, 0.5414), after
