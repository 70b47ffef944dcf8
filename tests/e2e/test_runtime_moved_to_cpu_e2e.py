"""A runtime moved from GPU nodes to CPU-only ones forgets its GPU, as the user sees it through kubectl, /debug
and the adapter's log: fake ModelMesh → real exporters (fake NVML, then `--no-gpu`) → the adapter, scraping.

Was: the runtime's memory of the GPU never shrank, so its last GPU proposal (5 here) was held for as long as the
adapter ran: no scale-down, no "no capacity" warning, every pod's GPU "missing". Its exporters now say they have
no GPU collector (no `collector="gpu"` series at all), which is what tells a CPU-only pod from a GPU pod whose
reading is late or failing (that one still holds: tests/e2e/test_missing_signal_e2e.py). Values by hand in the
comments; `scale_down_tau_s: 0` makes a fall show at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime, fake_gpus, served_over
from tests.support.processes import poll

pytestmark = pytest.mark.slow


def move_to_cpu_nodes(path: DataPath) -> None:
    """Each pod's exporter replaced, one after the other, by one started with `--no-gpu` (the pod template's
    sidecar after the runtime moved to CPU-only nodes), on the same address."""
    for pod, (args, _) in enumerate(path.exporter_commands):
        gpu_flags = {at for at, arg in enumerate(args) if arg in ("--gpu-window", "--gpu-interval")}
        cpu = [arg for at, arg in enumerate(args) if at not in gpu_flags and at - 1 not in gpu_flags]
        path.exporter_commands[pod] = ([*cpu, "--no-gpu"], {})
        path.restart_exporter(pod)


def gpu_states(path: DataPath) -> list[str]:
    pods = debug_runtime(path).get("pods") or []
    return [pod["signals"]["gpu"] for pod in pods]  # type: ignore[attr-defined]


def test_a_runtime_whose_pods_now_have_no_gpu_scales_on_its_request_rate(tmp_path: Path) -> None:
    gpus = fake_gpus(tmp_path, [90, 90, 90, 90])
    policy = {"scale_down_tau_s": 0, "target_rps_per_pod": 100}
    with data_path_running(tmp_path, pods=4, rps=45, gpus=gpus, policy=policy) as path:
        # GPU: 4 pods x 0.9 / 0.8 = 4.5 pods: 5. Requests: 4 x 45 / 100 = 1.8 pods: 2 (rates a tenth off still 2).
        path.until_served("modelmesh_desired_replicas", lambda served: served == 5.0, timeout=40)

        move_to_cpu_nodes(path)
        # Without the GPU: the request term's 2 pods.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 2.0, timeout=30)
        assert all(value == 2.0 for value in served_over(path, "modelmesh_desired_replicas", 3))
        document = debug_runtime(path)
        assert gpu_states(path) == ["absent"] * 4, document
        assert "gpu" not in document["signal_coverage"], document  # type: ignore[operator]
        assert "gpu" not in document["proposals"] or document["proposals"]["gpu"] is None, document  # type: ignore[index,operator]
        assert "no ready pod has a GPU collector" in str(document["reason"]), document
        forgot = [line for line in path.adapter_log().splitlines() if "forgets its GPU" in line]
        assert len(forgot) == 1, path.adapter_log()[-3000:]
        assert "INFO" in forgot[0] and f"default/{DEPLOYMENT}" in forgot[0] and "--no-gpu" in forgot[0], forgot


def test_a_runtime_left_without_a_capacity_signal_is_warned_about(tmp_path: Path) -> None:
    gpus = fake_gpus(tmp_path, [90, 90, 90])
    with data_path_running(tmp_path, pods=3, rps=50, gpus=gpus, policy={"scale_down_tau_s": 0}) as path:
        # 3 pods x 0.9 / 0.8 = 3.4 pods: 4.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 4.0, timeout=40)

        move_to_cpu_nodes(path)
        # No capacity signal left: the Ready pods, 3, and the warning that names the setting to add.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 3.0, timeout=30)
        document = debug_runtime(path)
        assert any("target_rps_per_pod" in warning for warning in document["warnings"]), document  # type: ignore[attr-defined]
        assert "no capacity signal" in path.adapter_log()


def restart_with_gpu_collector_failing(path: DataPath) -> None:
    """Each pod's exporter restarted with its GPU collector on but no NVML to load (a sidecar with GPU flags on a
    node without the driver): it publishes `collector_success{collector="gpu"} 0` and no GPU reading."""
    for pod, (args, _) in enumerate(path.exporter_commands):
        on = [arg for arg in args if arg != "--no-gpu"]
        path.exporter_commands[pod] = ([*on, "--gpu-window", "1", "--gpu-interval", "0.2"], {})
        path.restart_exporter(pod)


def test_after_forgetting_only_a_pod_reporting_a_gpu_reading_brings_the_gpu_back(tmp_path: Path) -> None:
    """Was: the log line and docs said "a pod with a GPU collector again, failing or not, brings the GPU back",
    and `modelmesh_gpu_busy` answered "unknown right now", as if it would pass. A failing GPU collector brings
    nothing back (deliberately: a default exporter on a CPU node has one), so the line says what does, and the
    503 says the runtime has no GPU signal."""
    gpus = fake_gpus(tmp_path, [90, 90])
    policy = {"scale_down_tau_s": 0, "target_rps_per_pod": 100}
    with data_path_running(tmp_path, pods=2, rps=45, gpus=gpus, policy=policy) as path:
        # GPU: 2 pods x 0.9 / 0.8 = 2.25 pods: 3. Requests: 2 x 45 / 100 = 0.9 pods: 1.
        path.until_served("modelmesh_desired_replicas", lambda served: served == 3.0, timeout=40)
        move_to_cpu_nodes(path)
        path.until_served("modelmesh_desired_replicas", lambda served: served == 1.0, timeout=30)
        forgot = [line for line in path.adapter_log().splitlines() if "forgets its GPU" in line]
        assert len(forgot) == 1 and "a pod that reports a GPU reading again brings it back" in forgot[0], forgot
        assert "failing or not" not in forgot[0], forgot

        restart_with_gpu_collector_failing(path)
        restarted = time.monotonic()
        # The restarted exporters' load is fresh once they have two ModelMesh reads (a rate): until then the pods
        # are stale and the value a 503 (the HPA holds), on a loaded machine after their GPU state already shows.
        # Their first rate spans one 0.5 s read interval, where a first read stamped 0.1 s late (a starved
        # exporter) makes 45 requests/s 56: 2 pods (a CI run read 2). Asserted once each exporter's rate spans its
        # 3 s load window, plus the adapter's 1 s refresh (made to fail with a 0.25 s stall before the first stamp).
        poll(lambda: gpu_states(path) == ["none", "none"] and time.monotonic() > restarted + 3 + 1
             and path.answered_value("modelmesh_desired_replicas") is not None, timeout=30)
        seen = served_over(path, "modelmesh_desired_replicas", 3)
        assert all(value == 1.0 for value in seen), seen
        code, answer = path.served("modelmesh_gpu_busy")
        message = str(answer)
        assert code != 0 and "unknown right now" not in message, message
        assert f"runtime default/{DEPLOYMENT} is not served: the runtime has no GPU signal" in message, message
        assert "no ready pod reports a GPU reading" in message, message
