"""Missing data never lowers a served value (docs/design.md §6), seen through the real adapter process and
`kubectl get --raw`: fake ModelMesh → real exporters (fake NVML where a GPU is needed) → the adapter, scraping
or reading a real Prometheus.

Every scenario was a reproduction of issue 10, where the value fell: GPU series vanishing on every pod (5 → 2),
the hot pod losing its GPU, rate and queue series (5 → 1 in one refresh), an exporter restart in Prometheus
mode, and a constant queue on one pod while idle pods are added (n + 1 at every step). Values are computed by
hand in the comments; `scale_down_tau_s: 0` makes any wrongful fall show at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.fakes.nvml import GPU_IS_LOST, FakeNvml
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import free_port, http_get, poll

pytestmark = pytest.mark.slow


def served_over(path: DataPath, metric: str, seconds: float) -> list[float | str]:
    """What the adapter serves for `metric` every half second for `seconds`, the last reading kubectl's: a value,
    or the error (its Status body; kubectl's text for the last one). The readings before are the same GET read in
    this process (`DataPath.answered`): a kubectl run every half second was two thirds of a file's kubectl CPU."""
    seen: list[float | str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(path.answered(metric)[1])
        time.sleep(0.5)
    return [*seen, path.served(metric)[1]]


def unknown(served: float | str) -> bool:
    """kubectl's error for a 503: the value is unknown and the HPA holds (the other errors are failures)."""
    return isinstance(served, str) and "ServiceUnavailable" in served


def fake_gpus(tmp_path: Path, utilization: list[int]) -> list[FakeNvml]:
    gpus = []
    for index, util in enumerate(utilization):
        directory = tmp_path / f"nvml-{index}"
        directory.mkdir()
        fake = FakeNvml.create(directory)
        fake.set_gpu(0, util=util)
        gpus.append(fake)
    return gpus


def debug_runtime(path: DataPath) -> dict[str, object]:
    """The runtime's /debug document; {} before the adapter's first refresh (503), so that polls retry."""
    status, body = http_get(f"{path.adapter_url}/debug/runtimes/default/{DEPLOYMENT}")
    if status == 503 and "first refresh" in body:
        return {}
    assert status == 200, body
    document: dict[str, object] = json.loads(body)
    return document


def test_gpu_series_vanishing_on_every_pod_hold_desired_and_gpu_busy(tmp_path: Path) -> None:
    """Was: the view stayed "complete" without the GPU and desired decayed 5 → 4 → 3 → 2."""
    gpus = fake_gpus(tmp_path, [90, 90, 90, 90])
    with data_path_running(tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 0}) as path:
        # 4 pods x 0.9 / 0.8 = 4.5 pods: 5.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 5.0, timeout=40)
        busy = path.until_served("modelmesh_gpu_busy", bool, timeout=10)
        assert isinstance(busy, float) and 0.85 <= busy <= 0.95

        for fake in gpus:  # the GPU collector fails on every pod; the ModelMesh collector goes on working
            fake.set_gpu(0, error=GPU_IS_LOST)
        poll(lambda: all(pod["signals"]["gpu"] != "fresh" for pod in debug_runtime(path)["pods"]),  # type: ignore[attr-defined]
             timeout=15)

        desired = served_over(path, "modelmesh_desired_replicas", 6)
        assert desired and all(value == 5.0 for value in desired), desired
        for value in served_over(path, "modelmesh_gpu_busy", 3):
            # Unknown (503: the HPA holds) or the held value; never lower.
            assert unknown(value) or (isinstance(value, float) and value >= busy - 0.01), value


def test_hot_pod_losing_its_gpu_rate_and_queue_series_keeps_desired(tmp_path: Path) -> None:
    """Was: with tau 0, desired fell to 1 in one refresh when the hot pod's series went missing (5 → 1 in the
    issue's example; here 3 → 1)."""
    gpus = fake_gpus(tmp_path, [90, 10, 10, 10])
    with data_path_running(tmp_path, pods=4, rps=50, gpus=gpus, policy={"scale_down_tau_s": 0}) as path:
        path.set_load(pod=0, queue_delay_ms=200)
        # GPU: M2(0.9, 0.1, 0.1, 0.1) = sqrt(0.84 / 4) = 0.458; x 4 pods / 0.8 = 2.29 pods.
        # Queue: 2.29 + (0.2 - 0.05) / 60 = 2.29 pods (drain 60 s). Desired 3; no request target, so no request term.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 3.0, timeout=40)

        # The hot pod's GPU is lost and its exporter restarts with a slow ModelMesh loop (no rate or queue
        # delay until its second reading, 4 s later) just as its ModelMesh container restarts too.
        gpus[0].set_gpu(0, error=GPU_IS_LOST)
        args, env = path.exporter_commands[0]
        slow = list(args)
        slow[slow.index("--modelmesh-interval") + 1] = "4"
        slow[slow.index("--load-window") + 1] = "10"
        path.exporter_commands[0] = (slow, env)
        path.restart_exporter(0)
        path.reset_counters(0)

        # Without the holds: GPU 3 x 0.1 / 0.8 = 0.375 pods, queue 0.375 + 0.01: desired 1.
        desired = served_over(path, "modelmesh_desired_replicas", 10)
        assert desired and all(isinstance(v, float) and v >= 3.0 for v in desired), desired
        pods = {pod["name"]: pod for pod in debug_runtime(path)["pods"]}  # type: ignore[attr-defined]
        assert dict(pods["pod-0"]["signals"])["gpu"] in ("missing", "stale"), pods["pod-0"]


@pytest.mark.parametrize("restart", ["exporter", "exporter and modelmesh"])
async def test_exporter_restart_in_prometheus_mode_does_not_lower_values(tmp_path: Path, restart: str) -> None:
    """Was: after a restart the pod's rate series were stale in Prometheus while its exporter reported a fresh
    ModelMesh collection, so the pod counted as fresh and idle: request load halved, desired 3 → 2."""
    port = free_port()
    with data_path_running(
        tmp_path, pods=2, rps=130, policy={"target_rps_per_pod": 100, "scale_down_tau_s": 0},
        adapter_args=["--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}",
                      "--max-staleness", "10"],
    ) as path:
        async with PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                    workdir=tmp_path / "prometheus"):
            # 2 pods x 130 req/s = 260 req/s at 100 per pod: 2.6 pods, 3.
            await asyncio.to_thread(path.until_served, "modelmesh_desired_replicas", lambda served: served == 3.0, 60)
            load = path.value("modelmesh_request_load")
            assert load is not None and 240 < load < 280

            args, env = path.exporter_commands[0]
            slow = list(args)  # no rate until its second ModelMesh reading, 4 s after the restart
            slow[slow.index("--modelmesh-interval") + 1] = "4"
            slow[slow.index("--load-window") + 1] = "10"
            path.exporter_commands[0] = (slow, env)
            await asyncio.to_thread(path.restart_exporter, 0)
            if restart == "exporter and modelmesh":
                path.reset_counters(0)

            desired = await asyncio.to_thread(served_over, path, "modelmesh_desired_replicas", 10)
            assert desired and all(isinstance(v, float) and v >= 3.0 for v in desired), desired
            for value in await asyncio.to_thread(served_over, path, "modelmesh_request_load", 3):
                assert unknown(value) or (isinstance(value, float) and value >= 240), value


async def until(check: Callable[[], object], timeout: float) -> None:
    await asyncio.to_thread(poll, check, timeout)


def test_constant_queue_on_one_pod_with_idle_pods_added_settles(tmp_path: Path) -> None:
    """Was: n + ceil(Σq / drain) = n + 1 at every step, 1 → 41 in 40 steps under an HPA."""
    pods = 6
    with data_path_running(
        tmp_path, pods=pods, rps=0,
        policy={"target_rps_per_pod": 100, "scale_down_tau_s": 0, "max_replicas": 20},
    ) as path:
        path.set_load(pod=0, requests_per_second=30, queue_delay_ms=200)
        targets = tmp_path / "targets.yaml"
        document = yaml.safe_load(targets.read_text())
        every = document["runtimes"][0]["pods"]
        steps: list[tuple[int, float]] = []
        for count in range(1, pods + 1):
            document["runtimes"][0]["pods"] = every[:count]
            targets.write_text(yaml.safe_dump(document))
            poll(lambda: debug_runtime(path).get("fresh_pods") == count, timeout=20)  # noqa: B023 (called at once)
            # n pods, one at 30 req/s: D = n x 30/sqrt(n) / 100 = 0.3 sqrt(n) ≤ 0.74 for n ≤ 6;
            # queue term D + (0.2 - 0.05) / 60 ≤ 0.74: one pod at every step.
            time.sleep(1.5)
            desired = served_over(path, "modelmesh_desired_replicas", 2)
            steps.append((count, max(v for v in desired if isinstance(v, float))))
        assert all(value == 1.0 for _, value in steps), steps
