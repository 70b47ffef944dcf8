"""Two real adapter processes share one Lease on the fake API server: exactly one writes deletion costs; when
it is killed the other takes over within about a lease duration and writes; a clean shutdown releases the
Lease. The exporters are a small in-test server: what matters here is the pods, not the signals."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web

from autoscaler.names import DELETION_COST_ANNOTATION
from exporter import names
from tests.actuation.conftest import KEY, add_pods
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import TEST_PROCESS_ENV, free_port

pytestmark = pytest.mark.slow

LOAD = {"pod-busy": 90.0, "pod-some": 30.0, "pod-idle": 0.0}
LEASE_S, RENEW_S, RETRY_S = 2.0, 1.5, 0.25
REPO = Path(__file__).resolve().parents[2]
IDENTITY = re.compile(r"holding Lease \S+; identity (\S+)")


def exporter_text(rps: float) -> str:
    return (
        f"# TYPE {names.REQUESTS_PER_SECOND} gauge\n{names.REQUESTS_PER_SECOND} {rps}\n"
        f"# TYPE {names.LAST_SUCCESS_TIMESTAMP} gauge\n"
        f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_MODELMESH}"}} {time.time()}\n'
    )


async def metrics(request: web.Request) -> web.Response:
    return web.Response(text=exporter_text(LOAD[request.match_info["pod"]]), content_type="text/plain")


@pytest.fixture
async def exporters() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/{pod}/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


class Adapter:
    """One `modelmesh-autoscaler serve` process; its identity is read from its start-up log line."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path, url: str) -> None:
        self.process, self.log, self.url = process, log, url

    @property
    def identity(self) -> str | None:
        match = IDENTITY.search(self.log.read_text())
        return match.group(1) if match else None

    @property
    def user_agent(self) -> str:
        return f"({self.identity})"

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.returncode is None:
            self.process.send_signal(sig)
            try:
                async with asyncio.timeout(10):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode if self.process.returncode is not None else -1


async def start_adapter(workdir: Path, index: int, targets: Path, kubeconfig: Path, *more: str) -> Adapter:
    port = free_port()
    log = workdir / f"adapter-{index}.log"
    env = {**{k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}, **TEST_PROCESS_ENV}
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
            "--targets", str(targets), "--kubeconfig", str(kubeconfig), "--refresh-interval", "0.5",
            "--window", "3", "--leader-elect", "true", "--leader-elect-lease-duration", str(LEASE_S),
            "--leader-elect-renew-deadline", str(RENEW_S), "--leader-elect-retry-period", str(RETRY_S), *more,
            stdout=output, stderr=asyncio.subprocess.STDOUT, cwd=REPO, env=env,
        )
    return Adapter(process, log, f"https://127.0.0.1:{port}")


def runtime_files(kube: FakeKubeApi, exporters: str, workdir: Path) -> tuple[Path, Path]:
    """(targets file, kubeconfig) for adapters over the runtime's `LOAD` pods, added to the fake cluster."""
    add_pods(kube, LOAD)
    kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig", namespace=KEY.namespace)
    targets = workdir / "targets.yaml"
    targets.write_text(yaml.safe_dump({"runtimes": [{
        "namespace": KEY.namespace, "deployment": KEY.deployment,
        "pods": [{"name": pod, "url": f"{exporters}/{pod}/metrics"} for pod in LOAD],
    }]}))
    return targets, kubeconfig


async def wait_for(condition: Callable[[], object], timeout: float, what: str) -> float:
    """Poll (without blocking the loop the fake API runs on) until true; the monotonic time it became true."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None
    return time.monotonic()


async def healthy(adapter: Adapter) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            if adapter.process.returncode is not None:
                raise AssertionError(f"adapter exited:\n{adapter.log.read_text()}")
            try:
                async with session.get(adapter.url + "/healthz", ssl=False) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"adapter never answered:\n{adapter.log.read_text()}")


def holder(kube: FakeKubeApi) -> str | None:
    lease = kube.get("leases", KEY.namespace, "modelmesh-autoscaler")
    return (lease or {}).get("spec", {}).get("holderIdentity") or None


def pod_writers(kube: FakeKubeApi, since: int = 0) -> dict[str, set[str]]:
    """User-Agent of every pod PATCH after request number `since`, by pod."""
    writers: dict[str, set[str]] = {}
    for request in kube.requests[since:]:
        if request.method == "PATCH" and request.resource == "pods" and request.status == 200:
            writers.setdefault(request.name or "", set()).add(request.headers.get("User-Agent", ""))
    return writers


async def test_two_adapters_one_lease_exactly_one_writes_and_the_other_takes_over(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    adapters = [await start_adapter(tmp_path, i, targets, kubeconfig) for i in range(2)]
    try:
        await asyncio.gather(*(healthy(adapter) for adapter in adapters))
        await wait_for(lambda: all(a.identity for a in adapters), 10, "both adapters log their identity")
        await wait_for(lambda: holder(kube) is not None and len(pod_writers(kube)) == len(LOAD), 15,
                       "a leader writes every pod")
        leader = next(a for a in adapters if a.identity == holder(kube))
        follower = next(a for a in adapters if a is not leader)
        # Waited for, not asked of a 1.5 s window (a loaded machine may start the follower's retries late).
        await wait_for(lambda: any(follower.user_agent in r.headers.get("User-Agent", "") for r in kube.requests
                                   if r.resource == "leases"), 15, "the follower is alive and watching the Lease")
        await asyncio.sleep(1.5)  # several refreshes and lease retries by both

        writers = pod_writers(kube)
        assert {ua for agents in writers.values() for ua in agents if leader.user_agent in ua} == set().union(
            *writers.values())
        assert {pod: kube.pod_annotations(KEY.namespace, pod)[DELETION_COST_ANNOTATION] for pod in LOAD} == {
            "pod-busy": "900", "pod-some": "300", "pod-idle": "0"}

        mark = len(kube.requests)
        await leader.stop(signal.SIGKILL)
        await wait_for(lambda: holder(kube) == follower.identity, 10, "the follower takes over")
        # Counted, not timed: the follower takes over at its first attempt once the Lease has gone unrenewed for
        # a lease duration by its clock, its attempts at least a retry period apart (see test_leader).
        attempts = sum(1 for r in kube.requests[mark:] if r.resource == "leases" and r.method == "GET"
                       and follower.user_agent in r.headers.get("User-Agent", ""))
        assert attempts <= LEASE_S / RETRY_S + 2, f"{attempts} attempts before the expired Lease was taken"
        await wait_for(lambda: len(pod_writers(kube, mark)) == len(LOAD), 5, "the new leader writes every pod")
        assert all(follower.user_agent in ua for agents in pod_writers(kube, mark).values() for ua in agents)

        assert await follower.stop() == 0
        assert holder(kube) is None, "a clean shutdown releases the Lease"
    finally:
        for adapter in adapters:
            await adapter.stop(signal.SIGKILL)
