"""`modelmesh-autoscaler demo`: the whole data path on one machine, in about a minute.

Fake ModelMesh containers (https, like the real ones) run in this process with load that changes by phase;
one real `modelmesh-exporter` process per pod reads them; one real `modelmesh-autoscaler serve` process
scrapes the exporters and serves the external metrics API. Every few seconds the demo prints, side by side,
what each pod is doing, what the adapter serves, and what an HPA on the plain average would have asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh import FakeModelMesh, ModelMeshLoad, build_app
from autoscaler.names import GROUP_VERSION, ServedMetric

NAMESPACE = "default"
DEPLOYMENT = "modelmesh-serving-demo"
TARGET_RPS_PER_POD = 100.0


@dataclass(frozen=True)
class Phase:
    starts_at: float  # fraction of the demo's duration
    title: str
    rps: tuple[float, ...]


PHASES = (
    Phase(0.0, "even load: every pod serves 60 req/s", (60, 60, 60, 60)),
    Phase(0.25, "a hot model lands on pod 0: 380 req/s there, the rest stay at 40",
          (380, 40, 40, 40)),
    Phase(0.6, "traffic drops to 15 req/s per pod: the adapter lowers its answer slowly", (15, 15, 15, 15)),
)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    parser.add_argument("--pods", type=int, default=4, help="fake ModelMesh pods (default 4)")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between printed tables (default 3)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class DemoPod:
    name: str
    fake: FakeModelMesh
    modelmesh_port: int
    exporter_port: int


class Demo:
    def __init__(self, pods: int, duration: float, interval: float, workdir: Path) -> None:
        self.duration, self.interval, self.workdir = duration, interval, workdir
        self.pods = [
            DemoPod(f"demo-{i}", FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6)),
                    free_port(), free_port())
            for i in range(pods)
        ]
        self.adapter_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        certs = generate_self_signed(self.workdir / "modelmesh-tls", "fake-modelmesh", ["127.0.0.1"])
        tls = server_context(certs.cert_file, certs.key_file)
        runners = []
        try:
            for pod in self.pods:
                runner = web.AppRunner(build_app(pod.fake), handle_signals=False, access_log=None)
                await runner.setup()
                await web.TCPSite(runner, "127.0.0.1", pod.modelmesh_port, ssl_context=tls).start()
                runners.append(runner)
            self._start_processes(certs.cert_file)
            yield
        finally:
            self._stop_processes()
            for runner in runners:
                await runner.cleanup()

    def _start_processes(self, modelmesh_ca: Path) -> None:
        log = open(self.workdir / "processes.log", "ab")  # noqa: SIM115 - closed with the processes
        for pod in self.pods:
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "exporter.cli", "--listen", f"127.0.0.1:{pod.exporter_port}",
                 "--modelmesh-url", f"https://127.0.0.1:{pod.modelmesh_port}/metrics",
                 "--modelmesh-ca-file", str(modelmesh_ca), "--no-gpu",
                 "--modelmesh-interval", "1", "--load-window", "6"],
                stdout=log, stderr=log,
            ))
        targets = {"runtimes": [{
            "namespace": NAMESPACE, "deployment": DEPLOYMENT,
            "pods": [{"name": p.name, "url": f"http://127.0.0.1:{p.exporter_port}/metrics"} for p in self.pods],
        }]}
        (self.workdir / "targets.yaml").write_text(yaml.safe_dump(targets))
        policy = {"defaults": {"target_rps_per_pod": TARGET_RPS_PER_POD, "scale_down_tau_s": 20}}
        (self.workdir / "policy.yaml").write_text(yaml.safe_dump(policy))
        self.processes.append(subprocess.Popen(
            [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev",
             "--listen", f"127.0.0.1:{self.adapter_port}", "--targets", str(self.workdir / "targets.yaml"),
             "--config", str(self.workdir / "policy.yaml"), "--refresh-interval", "2", "--window", "6"],
            stdout=log, stderr=log,
        ))

    def _stop_processes(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def apply_phase(self, elapsed: float) -> Phase:
        phase = [p for p in PHASES if elapsed >= p.starts_at * self.duration][-1]
        for index, pod in enumerate(self.pods):
            rps = phase.rps[index % len(phase.rps)]
            if pod.fake.load.requests_per_second != rps:
                pod.fake.update(requests_per_second=rps, queue_delay_ms=80.0 if rps > 300 else 2.0)
        return phase

    async def served(self, session: aiohttp.ClientSession, metric: ServedMetric) -> str:
        url = (f"https://127.0.0.1:{self.adapter_port}/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/"
               f"{metric.value}?labelSelector=deployment%3D{DEPLOYMENT}")
        try:
            async with session.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=2)) as response:
                body = await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return "starting"
        if response.status == 503 and metric is ServedMetric.GPU_BUSY:
            return "n/a (no GPU on the fake pods)"
        if response.status != 200:
            return f"{response.status} {body.get('reason', '')}"
        value = str(body["items"][0]["value"])
        return f"{int(value.removesuffix('m')) / 1000:g}" if value.endswith("m") else value

    async def exporter_rps(self, session: aiohttp.ClientSession, pod: DemoPod) -> float | None:
        try:
            async with session.get(f"http://127.0.0.1:{pod.exporter_port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=2)) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        for line in text.splitlines():
            if line.startswith("modelmesh_pod_requests_per_second "):
                return float(line.split()[1])
        return None

    async def deletion_costs(self, session: aiohttp.ClientSession) -> dict[str, int]:
        """The pod-deletion cost the adapter ranks each pod at, from its `/debug` explanation."""
        url = f"https://127.0.0.1:{self.adapter_port}/debug/runtimes/{NAMESPACE}/{DEPLOYMENT}"
        try:
            async with session.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=2)) as response:
                body = await response.json() if response.status == 200 else {}
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return {}
        return {pod["name"]: pod["deletion_cost"] for pod in body.get("pods", [])
                if pod.get("deletion_cost") is not None}

    async def report(self, session: aiohttp.ClientSession, elapsed: float, phase: Phase) -> None:
        rates = await asyncio.gather(*(self.exporter_rps(session, pod) for pod in self.pods))
        served = {m: await self.served(session, m) for m in ServedMetric}
        costs = await self.deletion_costs(session)
        print(f"\n[{elapsed:4.0f}s] {phase.title}")
        print("  pod      true req/s   exporter req/s   deletion cost")
        for pod, rate in zip(self.pods, rates, strict=True):
            shown = "   -" if rate is None else f"{rate:8.1f}"
            cost = costs.get(pod.name)
            print(f"  {pod.name:8} {pod.fake.load.requests_per_second:10.0f}   {shown}"
                  f"         {'-' if cost is None else cost:>6}")
        known = [r for r in rates if r is not None]
        if known:
            average_wants = math.ceil(sum(known) / TARGET_RPS_PER_POD - 1e-9)
            print(f"  an HPA on the average would want {max(1, average_wants)} pods "
                  f"(mean {sum(known) / len(known):.0f} req/s per pod, target {TARGET_RPS_PER_POD:.0f})")
        print(f"  adapter serves: request_load={served[ServedMetric.REQUEST_LOAD]}  "
              f"desired_replicas={served[ServedMetric.DESIRED_REPLICAS]}  "
              f"cache_pressure={served[ServedMetric.CACHE_PRESSURE]}  gpu_busy={served[ServedMetric.GPU_BUSY]}")
        if costs and min(costs.values()) < max(costs.values()):
            cheapest, dearest = min(costs.values()), max(costs.values())
            first = [name for name, cost in sorted(costs.items()) if cost == cheapest]
            last = [name for name, cost in sorted(costs.items()) if cost == dearest]
            print(f"  on scale-down the ReplicaSet removes {', '.join(first)} first (deletion cost {cheapest}), "
                  f"{', '.join(last)} last ({dearest})")
        sys.stdout.flush()

    async def run(self) -> None:
        started = time.monotonic()
        async with self.running(), aiohttp.ClientSession() as session:
            print(f"demo: {len(self.pods)} fake ModelMesh pods, {len(self.pods)} exporters, adapter on "
                  f"https://127.0.0.1:{self.adapter_port} (logs in {self.workdir}/processes.log)")
            print(f"try: curl -sk 'https://127.0.0.1:{self.adapter_port}/apis/{GROUP_VERSION}/namespaces/"
                  f"{NAMESPACE}/modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}'")
            while (elapsed := time.monotonic() - started) < self.duration:
                phase = self.apply_phase(elapsed)
                await asyncio.sleep(min(self.interval, max(0.0, self.duration - elapsed)))
                await self.report(session, time.monotonic() - started, phase)
        print("\ndemo finished: every process stopped.")


async def _run_until_signalled(demo: Demo) -> int:
    """Run the demo; Ctrl-C or SIGTERM (even where the shell set SIGINT to be ignored, as it does for
    background jobs) cancels it, and cancelling stops every process it started."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await demo.run()
    except asyncio.CancelledError:
        print("\ninterrupted: every process stopped.")
        return 130
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    if args.pods < 1 or args.duration <= 0 or args.interval <= 0:
        print("demo: --pods, --duration and --interval must be positive", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="modelmesh-demo-") as directory:
        return asyncio.run(_run_until_signalled(Demo(args.pods, args.duration, args.interval, Path(directory))))


