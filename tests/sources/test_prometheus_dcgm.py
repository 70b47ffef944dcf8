"""`--gpu-source dcgm` against the series NVIDIA's dcgm-exporter really publishes, on a real Prometheus.

Labels as dcgm-exporter renders them (internal/pkg/rendermetrics, transformation/kubernetes.go): `gpu`, `UUID`,
`pci_bus_id`, `device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and with `--kubernetes` the `namespace`,
`pod` and `container` using the GPU. A MIG GPU instance adds `GPU_I_PROFILE` and `GPU_I_ID`, and has no
`DCGM_FI_DEV_GPU_UTIL` (DCGM does not measure it per instance; older releases report 0): its busy is
`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, a ratio (dcgm-exporter issues 105, 216, 430).
"""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import PodSample, RuntimeKey
from autoscaler.sources import prometheus as source_module
from autoscaler.sources import prometheus_dcgm
from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # spelled out: what dcgm-exporter publishes
RUNTIME = RuntimeKey("team-a", "modelmesh-serving-triton")
AGE_S = 10.0


def gpu(index: int, uuid: str, **extra: str) -> dict[str, str]:
    """A GPU's labels on every dcgm-exporter series, as scraped by a job that honors them."""
    return {"job": "dcgm-exporter", "instance": "10.0.3.7:9400", "gpu": str(index), "UUID": uuid,
            "pci_bus_id": f"00000000:{index + 0x3B:02X}:00.0", "device": f"nvidia{index}",
            "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "gpu-node-1", "DCGM_FI_DRIVER_VERSION": "550.54.15",
            **extra}


def used_by(pod: str) -> dict[str, str]:
    return {"namespace": RUNTIME.namespace, "pod": pod, "container": "triton"}


def mig(profile: str, instance: int) -> dict[str, str]:
    return {"GPU_I_PROFILE": profile, "GPU_I_ID": str(instance)}


def freshness(pod: str, at: float) -> list[Sample]:
    """The pod's exporter (run with EXPORTER_NO_GPU=true): its load signals and their freshness."""
    labels = {"namespace": RUNTIME.namespace, "pod": pod, "job": "modelmesh-exporter"}
    return [Sample(names.REQUESTS_PER_SECOND, labels, 10.0, at),
            Sample(names.LAST_SUCCESS_TIMESTAMP, labels | {"collector": names.COLLECTOR_MODELMESH}, at, at)]


async def read(url: str, pods: list[str], now: float, **options: str) -> dict[str, PodSample]:
    source = PrometheusSource(StaticDiscovery.of({(RUNTIME.namespace, RUNTIME.deployment): pods}), url,
                              gpu_source="dcgm", **options)  # type: ignore[arg-type]
    try:
        (snapshot,) = await source.collect(now)
    finally:
        await source.close()
    return {pod.name: pod for pod in snapshot.pods}


@pytest.mark.slow
async def test_mig_instances_read_their_graphics_engine_activity(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """A whole GPU reads DCGM_FI_DEV_GPU_UTIL (percent); a MIG instance, which has none (or, from older
    dcgm-exporters, a constant 0), reads DCGM_FI_PROF_GR_ENGINE_ACTIVE: without it a MIG runtime had no GPU
    busy at all, or one of 0 that scaled it down under load."""
    at = now - AGE_S
    whole = gpu(0, "GPU-5f1c") | used_by("whole-0")
    mig_a = gpu(1, "GPU-9a2e") | mig("3g.40gb", 1) | used_by("mig-0")
    mig_b = gpu(1, "GPU-9a2e") | mig("3g.40gb", 2) | used_by("mig-1")
    samples = [
        *freshness("whole-0", at), *freshness("mig-0", at), *freshness("mig-1", at),
        Sample(names.DCGM_GPU_UTIL, whole, 63, at), Sample(GR_ENGINE_ACTIVE, whole, 0.58, at),
        Sample(GR_ENGINE_ACTIVE, mig_a, 0.45, at - 5),
        Sample(names.DCGM_GPU_UTIL, mig_b, 0, at), Sample(GR_ENGINE_ACTIVE, mig_b, 0.7, at),
    ]
    prom = await start_prometheus(samples)

    pods = await read(prom.url, ["whole-0", "mig-0", "mig-1"], now)

    assert pods["whole-0"].gpu_busy == pytest.approx(0.63)  # the whole GPU's own utilization, as before
    assert pods["mig-0"].gpu_busy == pytest.approx(0.45)
    assert pods["mig-0"].gpu_sampled_at == pytest.approx(at - 5, abs=1e-3)
    assert pods["mig-1"].gpu_busy == pytest.approx(0.7)  # not the 0 an older dcgm-exporter reports


@pytest.mark.slow
async def test_a_gpu_time_sliced_between_pods_gives_each_its_own_share(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """dcgm-exporter `--kubernetes-virtual-gpus`: per pod sharing the GPU, a DCGM_FI_DEV_GPU_UTIL of its own
    processes (with `vgpu` and `pod_uid`), beside the device's own series with no pod, and copies of the whole
    GPU's profile metrics for each pod. Each pod reads its share, not the whole GPU's busy."""
    at = now - AGE_S
    device = gpu(0, "GPU-5f1c")
    shares = {"shared-0": 30.0, "shared-1": 20.0}
    samples = [Sample(names.DCGM_GPU_UTIL, device, 50, at)]
    for index, (pod, share) in enumerate(shares.items()):
        samples += [*freshness(pod, at),
                    Sample(names.DCGM_GPU_UTIL, device | used_by(pod) | {"vgpu": str(index), "pod_uid": f"u{index}"},
                           share, at),
                    Sample(GR_ENGINE_ACTIVE, device | used_by(pod) | {"vgpu": str(index)}, 0.5, at)]
    prom = await start_prometheus(samples)

    pods = await read(prom.url, list(shares), now)

    assert {pod: sample.gpu_busy for pod, sample in pods.items()} == {"shared-0": pytest.approx(0.3),
                                                                      "shared-1": pytest.approx(0.2)}


@pytest.mark.slow
@pytest.mark.parametrize("exporters", [0, 1, 4],
                         ids=["honoring labels", "not honoring labels", "four not honoring labels"])
async def test_dcgm_series_that_name_no_runtime_pod_are_said_in_the_log(
    start_prometheus: StartPrometheus, now: float, caplog: pytest.LogCaptureFixture, exporters: int,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """dcgm-exporter without `--kubernetes` labels no GPU with a pod: scraped honoring its labels its series
    have no pod at all, scraped without, the DCGM exporter's own pod. Either way no runtime pod has a GPU busy,
    and the log says why (once), instead of every GPU runtime quietly scaling on its other signals. It names the
    first three pods the series do name, and says how many more."""
    monkeypatch.setattr(prometheus_dcgm, "UNSEEN_WARN_AFTER_S", 0.0)
    at = now - AGE_S
    targets = [{"namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{index}"} for index in range(exporters)]
    samples = [*freshness("a-0", at), *(Sample(names.DCGM_GPU_UTIL, gpu(index, f"GPU-5f1{index}") | target, 63, at)
                                        for index, target in enumerate(targets or [{}]))]
    prom = await start_prometheus(samples)
    source = PrometheusSource(StaticDiscovery.of({(RUNTIME.namespace, RUNTIME.deployment): ["a-0"]}), prom.url,
                              gpu_source="dcgm")
    try:
        with caplog.at_level(logging.WARNING, logger=source_module.log.name):
            for _ in range(3):
                (snapshot,) = await source.collect(now)
    finally:
        await source.close()

    assert snapshot.pods[0].gpu_busy is None
    warnings = [r.getMessage() for r in caplog.records if "--kubernetes" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    if exporters == 1:
        assert "they name 1 other pods (gpu-operator/nvidia-dcgm-exporter-0)" in warnings[0]
    if exporters == 4:
        assert ("they name 4 other pods (gpu-operator/nvidia-dcgm-exporter-0, gpu-operator/nvidia-dcgm-exporter-1, "
                "gpu-operator/nvidia-dcgm-exporter-2 and 1 more)") in warnings[0], warnings[0]
    if exporters:
        assert "--dcgm-pod-label exported_pod" in warnings[0]


@pytest.mark.slow
async def test_a_dcgm_exporter_scraped_by_two_jobs_reads_as_its_newest_scrape(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """dcgm-exporter scraped by a ServiceMonitor and by an annotation-based job at the 1-minute default: the fast
    job scraped 90% AGE_S ago, the slow one 10% 60 s before. The GPU is as fresh as the fast job's scrape and at
    least as busy (the larger, as for every signal scraped twice). Taken by the oldest scrape, the GPU went missing
    on every pod for part of each minute (503, the GPU term frozen); averaged over the jobs, it read 50% busy."""
    at, slow = now - AGE_S, now - AGE_S - 60
    device = gpu(0, "GPU-5f1c") | used_by("a-0")
    samples = [*freshness("a-0", at), Sample(names.DCGM_GPU_UTIL, device, 90, at),
               Sample(names.DCGM_GPU_UTIL, device | {"job": "kubernetes-pods"}, 10, slow)]
    prom = await start_prometheus(samples)

    pods = await read(prom.url, ["a-0"], now)

    assert pods["a-0"].gpu_busy == pytest.approx(0.9)
    assert pods["a-0"].gpu_sampled_at == pytest.approx(at, abs=1e-3)
