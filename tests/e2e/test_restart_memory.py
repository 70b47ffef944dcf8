"""A restarted adapter does not forget downwards (issue: the adapter restarts while the hot pod's exporter is
down; with no memory and 3 of 4 pods fresh it served desired 3 -> 2 and the load of the cold pods alone).

Real processes throughout: fake ModelMesh pods with fake GPUs, real exporters, a first adapter that has
seen every pod, then a second adapter started after the hot pod's exporter died (a restart, a rolling update
or a new replica: a process with no memory), read through the real `kubectl get --raw`."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_adapter_process_metrics import started_at
from tests.fakes.nvml import FakeNvml
from tests.hardening.adapter import adapter_running
from tests.support.api_peek import peek_raw
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import http_get, poll
from tests.support.quantities import quantity_value

pytestmark = pytest.mark.slow

VALUES = ("modelmesh_desired_replicas", "modelmesh_request_load", "modelmesh_gpu_busy")
PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{}?labelSelector=deployment%3Dmodelmesh-serving-demo"
GRACE_S = 8.0
# One hot pod (150 req/s, GPU 90% busy) and three cold ones (20 req/s, 20%): with 150 req/s a pod,
# request load 4 x sqrt((150² + 3 x 20²) / 4) = 307.9 asks for 3 pods, GPU busy sqrt((0.9² + 3 x 0.2²) / 4)
# = 0.48 for 4 x 0.48 / 0.8 = 2.4 -> 3. The cold pods alone show 60 req/s and 0.2: 1 pod.
POLICY = {"target_rps_per_pod": 150, "scale_down_tau_s": 1, "warmup_grace_s": GRACE_S}


def read(kubeconfig: Path, metric: str) -> float | None:
    """The value kubectl reads, or None when the adapter answers an error (the HPA then holds)."""
    code, body = get_raw(kubeconfig, PATH.format(metric))
    if code != 0:
        assert "ServiceUnavailable" in str(body) or "503" in str(body), body
        return None
    value: str = body["items"][0]["value"]
    return quantity_value(value)


def peek(kubeconfig: Path, metric: str) -> float | None:
    """`read`'s value as the test process reads it, for waiting (`api_peek`); None for any error."""
    code, body = peek_raw(kubeconfig, PATH.format(metric))
    return quantity_value(body["items"][0]["value"]) if code == 0 else None


def until(kubeconfig: Path, condition: Callable[[Callable[[Path, str], float | None]], bool],
          timeout: float) -> None:
    """Wait until `condition(reader)` holds of the values read without kubectl, then of those kubectl reads."""
    poll(lambda: condition(peek), timeout=timeout)
    poll(lambda: condition(read), timeout=timeout)


def grace_surely_on_until(kubeconfig: Path, pid: int) -> float:
    """A time before which an answer of the adapter `pid` surely came within its warm-up grace. The grace runs
    from the runtime's first refresh, after the process started, so the process's start plus the grace is one
    such time: where the start took more than the grace (a run at -n 10: no reading in that window), /debug's
    refresh time plus the seconds of grace it says are left (rounded: less 1 s) is a later one. (It was the test's
    own clock after start-up less 2 s; three kubectl runs on a loaded machine took the last reading of that window
    past the grace.)"""
    def warming() -> dict[str, Any] | None:
        code, debug = get_raw(kubeconfig, "/debug/runtimes/default/modelmesh-serving-demo")
        return debug if code == 0 and debug.get("warming_up") else None

    debug = poll(warming, timeout=30)
    left = re.search(r"in (\d+) s \(warmup_grace_s\)", str(debug["warming_up"]))
    assert left, debug
    return max(started_at(pid) + GRACE_S, float(debug["refreshed_at"]) + int(left.group(1)) - 1.0)


def test_adapter_restarted_while_the_hot_pods_exporter_is_down_serves_nothing_lower(tmp_path: Path) -> None:
    gpus = []
    for i in range(4):
        (tmp_path / f"gpu-{i}").mkdir()
        gpus.append(FakeNvml.create(tmp_path / f"gpu-{i}"))
    for i, fake in enumerate(gpus):
        fake.set_gpu(0, util=90 if i == 0 else 20)
    (tmp_path / "first").mkdir()
    with data_path_running(tmp_path / "first", pods=4, rps=20, gpus=gpus, policy=POLICY) as path:
        path.set_load(pod=0, requests_per_second=150)
        until(path.kubeconfig, lambda value: value(path.kubeconfig, "modelmesh_desired_replicas") == 3.0
              and (value(path.kubeconfig, "modelmesh_request_load") or 0) > 290, timeout=30)
        before = {metric: path.value(metric) for metric in VALUES}
        assert before["modelmesh_desired_replicas"] == 3.0
        assert 0.4 < (before["modelmesh_gpu_busy"] or 0) < 0.55

        path.kill_exporter(0)
        policy_file = tmp_path / "first" / "policy.yaml"
        (tmp_path / "second").mkdir()
        with adapter_running(tmp_path / "second", path.exporter_urls, args=[
            "--refresh-interval", "1", "--window", "3", "--config", str(policy_file),
        ]) as restarted:
            kubeconfig = write_kubeconfig(tmp_path / "second" / "kubeconfig", restarted.url)
            grace_over_by = grace_surely_on_until(kubeconfig, restarted.process.pid)
            seen: list[dict[str, float | None]] = []
            warming: list[dict[str, float | None]] = []  # read in the grace period, for sure
            while time.time() < grace_over_by:  # warming up: the hot pod was never seen fresh
                desired, answered_by = read(kubeconfig, VALUES[0]), time.time()
                now = {VALUES[0]: desired, **{metric: read(kubeconfig, metric) for metric in VALUES[1:]}}
                seen.append(now)
                if answered_by < grace_over_by:
                    warming.append(now)
                for metric, value in now.items():
                    assert value is None or value >= (before[metric] or 0), (metric, before, seen)
                time.sleep(0.3)
            assert warming and all(s["modelmesh_desired_replicas"] is None for s in warming), seen
            assert "warming up" in restarted.log_text()
            # Why, for whoever looks: /debug names the pod and what it lacks; the self-metric says "warming up".
            code, debug = get_raw(kubeconfig, "/debug/runtimes/default/modelmesh-serving-demo")
            assert code == 0 and "3 of 4 ready pods fresh (pod-0: gpu stale" in debug["warming_up"], debug
            gauge = 'modelmesh_autoscaler_runtime_warming_up{deployment="modelmesh-serving-demo",namespace="default"}'
            assert f"{gauge} 1.0" in http_get(f"{restarted.url}/metrics")[1]

            # Past the grace period the recommendation is served, never below what runs (the 4 listed pods) and
            # held there while the hot pod is missing; request load and GPU busy, which the cold pods alone would
            # put at 60 req/s and 0.2, stay unknown (the HPA holds) and say which pod lacks what.
            until(kubeconfig, lambda value: value(kubeconfig, "modelmesh_desired_replicas") is not None,
                  timeout=GRACE_S + 10)
            for _ in range(5):
                now = {metric: read(kubeconfig, metric) for metric in VALUES}
                seen.append(now)
                assert now["modelmesh_desired_replicas"] == 4.0, seen
                for metric, value in now.items():
                    assert value is None or value >= (before[metric] or 0), (metric, before, seen)
                time.sleep(0.5)
            assert seen[-1]["modelmesh_request_load"] is None and seen[-1]["modelmesh_gpu_busy"] is None, seen
            code, why = get_raw(kubeconfig, PATH.format("modelmesh_request_load"))
            assert code != 0 and "requests not fresh on pod-0" in str(why), why
            assert f"{gauge} 1.0" in http_get(f"{restarted.url}/metrics")[1]

            # The hot pod's exporter back: every Ready pod fresh, the values are served in full and remembered.
            path.restart_exporter(0)
            until(kubeconfig, lambda value: (value(kubeconfig, "modelmesh_request_load") or 0) > 290, timeout=30)
            assert 0.4 < (read(kubeconfig, "modelmesh_gpu_busy") or 0) < 0.55
            assert f"{gauge} 0.0" in http_get(f"{restarted.url}/metrics")[1]
