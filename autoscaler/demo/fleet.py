"""The demo's runtime: fake ModelMesh pods that really come and go, each with a real exporter process, and
one real adapter process that finds them through a targets file it re-reads when it changes.

A new pod is "Ready" once its exporter answers; only then is it written into the targets file, as a
Kubernetes Endpoints object would list it. A removed pod leaves the targets file first, then stops. Every process
is started from the event loop's thread, the demo's main one, and ends with the demo even where it is killed
(`parent_death`); each is told to the directory's janitor as it starts (`on_start`, `workdir_janitor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from ssl import SSLContext
from typing import IO

import aiohttp
import yaml
from aiohttp import web

from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh import build_app
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.orphans import stop_adopted
from autoscaler.demo.parent_death import dying_with_this_process

NAMESPACE = "default"
DEPLOYMENT = "modelmesh-serving-demo"

PROCESS_STOP_S = 15.0
"""How long a process the demo started gets to stop after SIGTERM before it is killed: past the 10 s the adapter
gives its serving workers (`worker_pool.STOP_TIMEOUT_S`, not imported: the demo starts without the serving code),
so that the adapter stops them and removes its directories itself."""


def child_environment(workdir: Path) -> dict[str, str]:
    """The demo's processes get every setting as a flag; an `AUTOSCALER_*` or `EXPORTER_*` variable left in the
    user's shell (from trying `serve`) would otherwise change them, or stop them at start
    (`AUTOSCALER_SOURCE=prometheus` without a URL). Their temporary files (the adapter's self-signed certificate
    and key) go in `workdir`'s `tmp`: killed with the demo's whole group, the adapter removed nothing, and
    `mm-autoscaler-cert-*` was left in /tmp; there it goes with the demo's directory (`workdir_janitor`)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOSCALER_", "EXPORTER_"))}
    return {**kept, "TMPDIR": str(workdir / "tmp")}


PORT_MOVES = 3
"""How many times the adapter is started again on another port where its own was taken before it bound it."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(eq=False)
class DemoPod:
    name: str
    fake: FakeModelMesh
    modelmesh_port: int
    exporter_port: int
    created_at: float
    models: str  # the start of its model ids (`FakeModelMesh`'s `model_prefix`): whose models it holds copies of
    ready: bool = False
    runner: web.AppRunner | None = None
    process: subprocess.Popen[bytes] | None = None


@dataclass
class DemoFleet:
    workdir: Path
    policy: dict[str, object]
    adapter_port: int = field(default_factory=free_port)
    pods: list[DemoPod] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _serial: int = 0
    _tls: SSLContext | None = None
    _ca: Path | None = None
    _log: IO[bytes] | None = None
    _starting: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: set[asyncio.Task[None]] = field(default_factory=set)
    """The removed pods still being stopped (`remove_pod`); `running` waits for them as it ends."""
    _adapter: subprocess.Popen[bytes] | None = None
    _port_moves: int = 0
    on_start: Callable[[int], None] = lambda pid: None
    """Called with each process's id as it starts: the directory's janitor waits for it (`workdir_janitor`)."""

    @contextlib.asynccontextmanager
    async def running(self, initial_pods: int) -> AsyncIterator[None]:
        certs = generate_self_signed(self.workdir / "modelmesh-tls", "fake-modelmesh", ["127.0.0.1"])
        self._tls, self._ca = server_context(certs.cert_file, certs.key_file), certs.cert_file
        self._log = open(self.workdir / "processes.log", "ab")  # noqa: SIM115 - closed in finally
        (self.workdir / "tmp").mkdir(exist_ok=True)  # the processes' TMPDIR (`child_environment`)
        try:
            for _ in range(initial_pods):
                pod = await self.add_pod(wait=False, own_models=True)
                pod.ready = True  # running before the demo began
            self.write_targets()
            self.adapter_port = free_port()  # now, not before the pods started: less time for another to take it
            self._start_adapter()
            yield
        finally:
            for task in self._starting:
                task.cancel()
            for pod in list(self.pods):
                await self._stop_pod(pod)
            await asyncio.gather(*self.stopping, return_exceptions=True)
            self._stop(self.processes)
            stop_adopted()  # what they started: the adapter's worker and resource tracker
            self._log.close()

    def write_targets(self) -> None:
        ready = [p for p in self.pods if p.ready]
        targets = {"runtimes": [{
            "namespace": NAMESPACE, "deployment": DEPLOYMENT,
            "pods": [{"name": p.name, "url": f"http://127.0.0.1:{p.exporter_port}/metrics"} for p in ready],
        }]}
        path = self.workdir / "targets.yaml"
        staged = path.with_suffix(".tmp")
        staged.write_text(yaml.safe_dump(targets))
        staged.replace(path)  # atomic: the adapter never reads half a file

    def adapter_arguments(self) -> list[str]:
        """`modelmesh-autoscaler serve`'s arguments for the demo's adapter: no Kubernetes, the demo's targets file
        and policy, a refresh a second."""
        return ["--insecure-dev", "--listen", f"127.0.0.1:{self.adapter_port}",
                "--targets", str(self.workdir / "targets.yaml"), "--config", str(self.workdir / "policy.yaml"),
                "--refresh-interval", "1", "--window", "6"]

    def _start_adapter(self) -> None:
        (self.workdir / "policy.yaml").write_text(yaml.safe_dump({"defaults": self.policy}))
        self._adapter = self._start([sys.executable, "-m", "autoscaler.cli", "serve", *self.adapter_arguments()])

    def _moved_off_a_taken_port(self) -> bool:
        """Start the adapter again on another free port where its port was taken between `free_port` and the
        adapter's bind (a client's outgoing connection may get any free port as its own: on a busy machine the
        demo stopped with "cannot listen on 127.0.0.1:34569: Address already in use"). A few times at most."""
        said = self._last_adapter_error()
        if self._port_moves >= PORT_MOVES or said is None or "Address already in use" not in said:
            return False
        self._port_moves += 1
        self.adapter_port = free_port()
        self._start_adapter()
        return True

    def _last_adapter_error(self) -> str | None:
        lines = (self.workdir / "processes.log").read_text(errors="replace").splitlines()
        return next((line.split(": ", 1)[-1] for line in reversed(lines) if " ERROR autoscaler" in line), None)

    def _start(self, command: list[str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(dying_with_this_process(command), stdout=self._log, stderr=self._log,
                                   env=child_environment(self.workdir))
        self.processes.append(process)
        self.on_start(process.pid)
        return process

    def adapter_failure(self) -> str | None:
        """Why the adapter process has stopped, from its log's error line; None while it runs (or runs again on
        another port, its own taken meanwhile: `adapter_port` says which)."""
        if self._adapter is None or (code := self._adapter.poll()) is None:
            return None
        if self._moved_off_a_taken_port():
            return None
        said = self._last_adapter_error()
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return f"the adapter stopped ({how})" + (f": {said}" if said else "")

    async def add_pod(self, wait: bool = True, own_models: bool = False) -> DemoPod:
        """Start a fake ModelMesh and its exporter; it joins the targets once its exporter answers.

        `own_models`: the pod serves models of its own, as the pods the runtime ran with before the demo, which
        each hold the only copies of some models. A pod added by a scale-up holds copies of the oldest pod's
        models, where the demo's hot model lands (`run.Demo.apply_phase`), as ModelMesh's extra copies of hot
        models: removing one loses no model, which the unique-copy need term sees (each pod's `unique_models` in
        /debug). Copies of models only the added pods held would each be a pod's only copy whenever one added
        pod is left, and the scale-down would read "6 models only it served" for a pod that holds copies."""
        name = f"demo-{self._serial}"
        models = name if own_models or not self.pods else self.pods[0].models
        fake = FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6), model_prefix=models)
        pod = DemoPod(name, fake, free_port(), free_port(), created_at=time.time(), models=models)
        self._serial += 1
        pod.runner = web.AppRunner(build_app(pod.fake), handle_signals=False, access_log=None)
        await pod.runner.setup()
        await web.TCPSite(pod.runner, "127.0.0.1", pod.modelmesh_port, ssl_context=self._tls).start()
        pod.process = self._start(
            [sys.executable, "-m", "exporter.cli", "--listen", f"127.0.0.1:{pod.exporter_port}",
             "--modelmesh-url", f"https://127.0.0.1:{pod.modelmesh_port}/metrics",
             "--modelmesh-ca-file", str(self._ca), "--no-gpu", "--modelmesh-interval", "1", "--load-window", "6"])
        self.pods.append(pod)
        if wait:
            task = asyncio.create_task(self._become_ready(pod))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        return pod

    async def _become_ready(self, pod: DemoPod) -> None:
        async with aiohttp.ClientSession() as session:
            while pod in self.pods:
                try:
                    async with session.get(f"http://127.0.0.1:{pod.exporter_port}/metrics",
                                           timeout=aiohttp.ClientTimeout(total=1)) as response:
                        if response.status == 200:
                            pod.ready = True
                            self.write_targets()
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.2)

    async def remove_pod(self, name: str) -> None:
        """Remove a pod as a scale-down does: out of the targets at once (a terminating pod), its exporter and fake
        ModelMesh stopped in the background (`stopping`). Waited for on the demo's one event loop, an exporter that
        does not end on SIGTERM yet (one still starting on a loaded machine, or held stopped as the e2e fixture
        does) stopped the whole demo for up to `PROCESS_STOP_S`: the fake pods it serves answered no scrape, the
        adapter's values went unknown and came back at the count held before, and the HPA scaled up again right
        after the traffic drop. Waited for in the HPA's loop, it held the scale line back behind the tables."""
        pod = next(p for p in self.pods if p.name == name)
        self.pods.remove(pod)
        self.write_targets()
        task = asyncio.create_task(self._reap(pod))
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def _reap(self, pod: DemoPod) -> None:
        """Stop a removed pod's exporter (in a thread: it may take `PROCESS_STOP_S`) and its fake ModelMesh."""
        try:
            if pod.process is not None:
                await asyncio.to_thread(self._stop, [pod.process])
        finally:
            if pod.runner is not None:
                await pod.runner.cleanup()

    async def _stop_pod(self, pod: DemoPod) -> None:
        self.pods.remove(pod)
        if pod.process is not None:
            self._stop([pod.process])
        if pod.runner is not None:
            await pod.runner.cleanup()

    @staticmethod
    def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=PROCESS_STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
