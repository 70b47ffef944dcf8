"""Compare the exporter's GPU busy ratio with nvidia-smi on a machine with a real NVIDIA GPU.

Not a pytest test (pytest collects only test_*.py): run it by hand where a GPU is, from the repo root:

    python tests/gpu/check_nvml.py [--seconds 20] [--window 5]

It first probes NVML through exporter.nvml (driver, devices, how often NVML samples, whether its sample
timestamps agree with our wall clock), then starts `modelmesh-exporter --listen 127.0.0.1:PORT
--modelmesh-url http://127.0.0.1:1/metrics --gpu-window 5` (ModelMesh absent is fine; `python -m
exporter.cli` when the console script is not installed, or the collector in-process with --in-process),
loads GPU 0 with a matrix-multiply loop when torch or cupy is importable (idle, then full, then half
duty), and prints once a second the busy ratio the exporter serves beside `nvidia-smi --query-gpu
utilization.gpu` and nvidia-smi's mean over the same window. Exit status 0 when the exporter served busy
for every GPU and, under load, tracked nvidia-smi; 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere without installing

from prometheus_client.parser import text_string_to_metric_families

from exporter import names, nvml, nvml_errors

Phase = tuple[str, float, float]  # (name, seconds, duty cycle 0..1)


def probe_nvml() -> None:
    """Print what NVML offers here: the facts the collector's design relies on."""
    print("== NVML probe")
    try:
        session = nvml.NvmlSession.open()
    except nvml_errors.NvmlError as error:
        print(f"  NVML unavailable: {error}")
        return
    with session:
        print(f"  driver {session.driver_version()}")
        inventory = session.inventory()
        for failure in inventory.failures:
            print(f"  enumeration failure: {failure}")
        for device in inventory.devices:
            print(f"  GPU {device.label} {device.uuid} {device.name}")
            try:
                samples = session.utilization_samples(device, 0)
            except nvml_errors.NvmlError as error:
                print(f"    samples: {error}")
            else:
                if samples:
                    stamps = [s.timestamp_us for s in samples]
                    gaps = [b - a for a, b in itertools.pairwise(stamps)]
                    skew_s = stamps[-1] / 1e6 - time.time()
                    print(f"    samples: {len(samples)} in buffer spanning {(stamps[-1] - stamps[0]) / 1e6:.1f} s, "
                          f"period ~{statistics.median(gaps) / 1e3 if gaps else 0:.0f} ms, newest is "
                          f"{skew_s:+.3f} s from time.time(), values {[s.percent for s in samples[-5:]]}")
                else:
                    print("    samples: none")
            for what, read in (("rates", session.utilization_rate), ("memory", session.memory)):
                try:
                    print(f"    {what}: {read(device)}")
                except nvml_errors.NvmlError as error:
                    print(f"    {what}: {error}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def fetch_busy(url: str) -> dict[str, float] | None:
    """{uuid: busy ratio} served by the exporter; None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError):
        return None
    busy: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == names.GPU_BUSY_RATIO:
            for sample in family.samples:
                busy[sample.labels["uuid"]] = sample.value
    return busy


def nvidia_smi() -> dict[str, float]:
    """{uuid: utilization 0..1} from nvidia-smi."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid,utilization.gpu", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True, timeout=10,
    ).stdout
    result: dict[str, float] = {}
    for line in out.strip().splitlines():
        uuid, util = (part.strip() for part in line.split(","))
        try:
            result[uuid] = float(util) / 100
        except ValueError:  # "[N/A]" on MIG-enabled GPUs
            continue
    return result


@contextmanager
def exporter(port: int, window_s: float, in_process: bool, log_path: Path) -> Iterator[str]:
    """Run the exporter (process, or collector in-process) and yield its /metrics URL once it answers."""
    url = f"http://127.0.0.1:{port}/metrics"
    if in_process:
        with in_process_exporter(port, window_s):
            yield url
        return
    args = ["--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:1/metrics",
            "--gpu-window", str(window_s)]
    script = shutil.which("modelmesh-exporter")
    command = [script, *args] if script else [sys.executable, "-m", "exporter.cli", *args]
    print(f"== starting {' '.join(command)} (log: {log_path})")
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while fetch_busy(url) is None:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"exporter did not come up:\n{log_path.read_text()}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@contextmanager
def in_process_exporter(port: int, window_s: float) -> Iterator[None]:
    """The GPU collector and its health on prometheus_client's own HTTP server, for a tree without a CLI."""
    from prometheus_client import CollectorRegistry, start_http_server

    from exporter.collectors.gpu import GpuCollector
    from exporter.collectors.health import CollectorHealth

    print(f"== serving the GPU collector in-process on 127.0.0.1:{port}")
    health = CollectorHealth()
    collector = GpuCollector(health, window_s=window_s)
    registry = CollectorRegistry()
    registry.register(collector)
    registry.register(health)
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    loop = asyncio.new_event_loop()
    task = loop.create_task(collector.run())

    def sample() -> None:
        with suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
        loop.close()

    runner = threading.Thread(target=sample, daemon=True)
    runner.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(task.cancel)
        runner.join(timeout=5)
        server.shutdown()
        thread.join(timeout=5)


def load_function() -> tuple[str, Callable[[], None]] | None:
    """One GPU work item of ~20-50 ms on device 0 (torch, else cupy), or None when neither is there."""
    for module_name, make in (("torch", _torch_step), ("cupy", _cupy_step)):
        try:
            module: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        step = make(module)
        if step is not None:
            return module_name, step
    return None


def _torch_step(torch: Any) -> Callable[[], None] | None:
    if not torch.cuda.is_available():
        return None
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)

    def step() -> None:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()

    return step


def _cupy_step(cupy: Any) -> Callable[[], None] | None:
    b = cupy.random.rand(4096, 4096, dtype=cupy.float32)

    def step() -> None:
        for _ in range(10):
            b @ b
        cupy.cuda.Device().synchronize()

    return step


@dataclass
class Load:
    """Runs the work item with a duty cycle set by the main thread (0 idle, 1 flat out)."""

    step: Callable[[], None]
    duty: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        while not self.stop.is_set():
            if self.duty <= 0:
                time.sleep(0.02)
                continue
            started = time.monotonic()
            self.step()
            busy_s = time.monotonic() - started
            if self.duty < 1:
                time.sleep(busy_s * (1 - self.duty) / self.duty)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the comparison")
    parser.add_argument("--window", type=float, default=5.0, help="--gpu-window given to the exporter")
    parser.add_argument("--in-process", action="store_true", help="serve the collector here, not the CLI")
    options = parser.parse_args()
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA device 0 = NVML index 0

    probe_nvml()
    gpus = nvidia_smi()
    if not gpus:
        print("nvidia-smi reports no GPU utilization (no GPU, or MIG only): nothing to compare")
        return 1
    target = next(iter(gpus))  # nvidia-smi lists by index: the first is CUDA device 0
    loader = load_function()
    phases: list[Phase] = [("idle", options.seconds * 0.2, 0.0), ("full", options.seconds * 0.4, 1.0),
                           ("half", options.seconds * 0.4, 0.5)]
    load = Load(loader[1]) if loader else None
    print(f"== load on GPU {target}: {loader[0] if loader else 'none (neither torch nor cupy); reads only'}")

    log_path = Path(tempfile.mkdtemp(prefix="check-nvml-")) / "exporter.log"
    rows: list[tuple[str, float, float, float]] = []  # phase, exporter busy, smi now, smi windowed
    missing: set[str] = set()
    with exporter(free_port(), options.window, options.in_process, log_path) as url:
        worker = threading.Thread(target=load.loop, daemon=True) if load else None
        if worker:
            worker.start()
        recent: deque[tuple[float, float]] = deque()
        print(f"{'t':>5}  {'phase':<5}  {'exporter':>8}  {'smi':>5}  {'smi avg':>7}   (GPU {target})")
        started = time.monotonic()
        for name, seconds, duty in phases:
            if load:
                load.duty = duty
            phase_end = time.monotonic() + seconds
            while time.monotonic() < phase_end:
                time.sleep(1)
                served = fetch_busy(url) or {}
                smi = nvidia_smi()
                missing |= set(smi) - set(served)
                now = time.monotonic()
                recent.append((now, smi.get(target, 0.0)))
                while recent[0][0] < now - options.window:
                    recent.popleft()
                smi_avg = statistics.fmean(v for _, v in recent)
                busy = served.get(target, float("nan"))
                rows.append((name, busy, smi.get(target, 0.0), smi_avg))
                print(f"{now - started:5.1f}  {name:<5}  {busy:8.2f}  {smi.get(target, 0.0):5.2f}  {smi_avg:7.2f}")
        if load:
            load.stop.set()
        if worker:
            worker.join(timeout=10)

    print("== summary")
    ok = not missing
    if missing:
        print(f"  FAIL: exporter served no busy ratio for {sorted(missing)} (see {log_path})")
    for name, _seconds, _duty in phases:
        # Skip the first window of each phase: the exporter's window still holds the previous phase.
        settled = [r for r in rows if r[0] == name][int(options.window):]
        if not settled:
            continue
        exporter_mean = statistics.fmean(r[1] for r in settled)
        smi_mean = statistics.fmean(r[3] for r in settled)
        diff = exporter_mean - smi_mean
        print(f"  {name:<5} exporter {exporter_mean:.2f}  nvidia-smi {smi_mean:.2f}  diff {diff:+.2f}")
        if loader and not abs(diff) <= 0.2:  # NaN (no busy served) fails too
            ok = False
            print(f"  FAIL: {name}: exporter and nvidia-smi differ by more than 0.2")
    print("  PASS" if ok else "  FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
