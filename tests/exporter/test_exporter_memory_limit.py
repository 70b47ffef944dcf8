"""The sidecar's memory limit holds the largest ModelMesh answer the exporter reads.

The exporter reads a ModelMesh answer of up to `MAX_BODY_BYTES` (a ModelMesh, or a proxy in front of it, that
ignores the `name[]` query sends all of its per-model histograms: some 25 KiB per model). A read that size must
fit in the memory limit of the container spec the manifests give the sidecar: past it the kubelet OOM-kills the
sidecar, its counters are lost, and a crash-looping container makes the whole runtime pod NotReady. Measured
as the real process's peak resident memory (VmHWM), with the reader as it is, whatever it becomes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from exporter import names
from exporter.collectors.modelmesh import MAX_BODY_BYTES
from tests.exporter.modelmesh_wire import answering_in_a_thread
from tests.support.processes import free_port, http_get, poll, running

REPO = Path(__file__).resolve().parents[2]
SIDECAR_PATCH = REPO / "manifests" / "examples" / "exporter-sidecar-patch.yaml"

_HEAD = """\
# HELP modelmesh_instance_lru_age_seconds Last used age of least recently used model in pod (secs ago)
# TYPE modelmesh_instance_lru_age_seconds gauge
modelmesh_instance_lru_age_seconds 900.0
# HELP modelmesh_instance_capacity_bytes Effective model capacity of pod excluding unload buffer
# TYPE modelmesh_instance_capacity_bytes gauge
modelmesh_instance_capacity_bytes 1.7179869184e+10
# HELP modelmesh_instance_used_bytes Amount of capacity currently in use by loaded models
# TYPE modelmesh_instance_used_bytes gauge
modelmesh_instance_used_bytes 8.589934592e+09
# HELP modelmesh_instance_models_total Number of model copies loaded in pod
# TYPE modelmesh_instance_models_total gauge
modelmesh_instance_models_total 8.0
# HELP modelmesh_invoke_model_milliseconds Internal model server inference request time
# TYPE modelmesh_invoke_model_milliseconds histogram
"""
_BUCKETS = ("0.5", "1.0", "2.0", "4.0", "7.0", "10.0", "20.0", "35.0", "50.0", "75.0", "100.0", "150.0", "200.0",
            "300.0", "400.0", "500.0", "750.0", "1000.0", "2000.0", "+Inf")


def unfiltered_modelmesh_body(limit: int) -> bytes:
    """ModelMesh's invoke histogram with per-model series, buckets included (what a server that ignores
    `name[]` sends), for as many models as fit in `limit` bytes."""
    parts = [_HEAD]
    size = len(_HEAD)
    model = 0
    while True:
        labels = f'code="OK",method="ModelInfer",modelId="model-{model:06d}",vModelId=""'
        lines = [f"modelmesh_invoke_model_milliseconds_bucket{{{labels},le=\"{le}\"}} 12.0\n" for le in _BUCKETS]
        lines += [f"modelmesh_invoke_model_milliseconds_count{{{labels}}} 12.0\n",
                  f"modelmesh_invoke_model_milliseconds_sum{{{labels}}} 240.0\n"]
        chunk = "".join(lines)
        if size + len(chunk) > limit:
            return "".join(parts).encode()
        parts.append(chunk)
        size += len(chunk)
        model += 1


@pytest.fixture
def unfiltered_modelmesh() -> Iterator[str]:
    """A plain-http ModelMesh stand-in that answers every read with a body just under `MAX_BODY_BYTES`."""
    body = unfiltered_modelmesh_body(MAX_BODY_BYTES)

    with answering_in_a_thread(lambda path: body, "text/plain; version=0.0.4; charset=utf-8") as url:
        yield url


def sidecar_memory_limit_bytes() -> int:
    """The sidecar container's `resources.limits.memory`, from the manifest users apply."""
    patch = yaml.safe_load(SIDECAR_PATCH.read_text())
    text = str(patch[0]["value"]["resources"]["limits"]["memory"])
    match = re.fullmatch(r"(\d+)(Mi|Gi)", text)
    assert match, f"unexpected memory quantity {text!r}"
    return int(match[1]) << (20 if match[2] == "Mi" else 30)


def peak_resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for peak memory")
def test_the_largest_body_read_fits_the_sidecars_memory_limit(unfiltered_modelmesh: str, tmp_path: Path) -> None:
    port = free_port()
    args = ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url", unfiltered_modelmesh,
            "--modelmesh-timeout", "30", "--modelmesh-interval", "1", "--load-window", "30"]
    success = f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}}'
    with running(args, f"http://127.0.0.1:{port}/healthz", tmp_path / "exporter.log") as exporter:
        # Two reads: the second holds the first one's reading while it parses the next.
        first = poll(lambda: [line for line in http_get(f"http://127.0.0.1:{port}/metrics", timeout=10)[1]
                              .splitlines() if line.startswith(success)], timeout=60)
        poll(lambda: [line for line in http_get(f"http://127.0.0.1:{port}/metrics", timeout=10)[1].splitlines()
                      if line.startswith(success) and [line] != first], timeout=60)
        peak = peak_resident_bytes(exporter.pid)
    limit = sidecar_memory_limit_bytes()
    assert peak < 0.8 * limit, (
        f"reading a {MAX_BODY_BYTES / (1 << 20):.0f} MiB ModelMesh answer took the exporter to {peak / (1 << 20):.0f} "
        f"MiB resident; the sidecar's memory limit is {limit / (1 << 20):.0f} MiB ({SIDECAR_PATCH.name})"
    )
