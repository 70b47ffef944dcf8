"""What an HPA feels at fleet size: the real adapter (`modelmesh-autoscaler serve`, auth on, refresh running)
serving 10 to 5,000 runtimes, against a bare aiohttp TLS handler returning the same bytes.

For each fleet size: one process serves every pod's exporter output (2 pods a runtime, the exporter's own
series with a fresh collection timestamp and clock on every scrape); one process runs the fake Kubernetes API
that answers the adapter's SubjectAccessReviews; the adapter runs as a real process with TLS, the front-proxy CA
and `--requestheader-allowed-names`, scraping the fleet every `--refresh-interval` seconds: by default chosen
per fleet size (`RefreshPlan`: 15 s, 6 ms a pod at 2,500 runtimes and more; the scrape timeout the interval) so
that the fake fleet is scraped within each refresh's deadline on this bench's shared core, and printed. Clients present
the aggregator's front-proxy certificate (trustme) and `X-Remote-User`, as kube-apiserver does, and ask for
every runtime x metric in turn, once the adapter knows every runtime's values. Two clients, rounds interleaved
between the adapter and the bare handler:

- load: `--concurrency` keep-alive connections (default 10, as wrk), one request in flight on each, for
  `--seconds`, from ApacheBench where it is installed (`--load-client ab`: a client in C, at a raised priority
  where allowed, that leaves the p99 to the server's queue; `bench/apachebench.py`) or from aiohttp
  (`--load-client python`, over every runtime x metric, whose own core adds to the p99);
- HPA pace: one HPA per runtime asking for its 4 metrics every 15 s (runtimes x 4 / 15 requests a second,
  open loop over 16 connections like the aggregator's), for `--hpa-seconds`. The schedule is dealt to
  `--hpa-clients` client processes, each with its own connections, so that one client's event loop is not
  the bottleneck; each reports how late it sent against the schedule ("client lateness"). When lateness p99
  approaches the latency p99, the client, not the server, sets the figure. Each client process opens its
  connections before the schedule starts, as the aggregator keeps its connections open;
- same rate: the HPA-paced client again, at one rate for every fleet size (`--same-rate`, by default the
  largest fleet's HPA pace), so that the fleet's size is the only thing that differs between the rows. At
  HPA pace a 10-runtime fleet is asked 2.7 times a second and a 5,000-runtime one 1,333 times: the load,
  not the fleet, would differ. The last line gives the spread of p99 over the fleet sizes both ways.

Where there are two CPUs or more, the serving processes (the adapter's worker, the bare handler) get CPU 0
alone (with `--workers N`, CPUs 0 to N-1, where there is one more) and everything else the others
(`--serving-cpu`): the adapter's pod has a core for each worker and one for its refresh (its CPU limit is
workers + 1), and real HPAs and exporters run elsewhere; without it the figures are those of a machine where
four client processes, the fake fleet and the refresh take the worker's core by turns. `--cpu-limit N` runs
the adapter under a pod's CPU limit instead. The clients (ab, the HPA-paced processes, the aiohttp load run)
share the other CPU with the fake fleet and the refresh, which in a cluster run elsewhere, so they run at a
raised priority where allowed (`bench/client_priority.py`); without it their own wait for that core is part of
the p99, for either server.

The fake exporters answer from a bare asyncio protocol: real exporters run on other nodes, so on the
benchmark's machine their cost should take as little as possible from the adapter's cores.

Answers that are not 2xx do not stop a run: they are counted per status, as ab and wrk count them, and shown per
server in the row. A 503 (the adapter's answer while a runtime's values are unknown) is answered faster than a
value, so a run with more than 1% of them has its p50 / p99 marked ⚠ and a line under the table (ab's
percentiles include every answer; the Python clients time only 2xx answers). Each row also says whether the
adapter kept up with the fleet (its mean refresh against the interval, scrapes cut off at the deadline,
runtimes unknown when the row ended), from its own /metrics.

The adapter reads its fleet from a targets file here; cluster mode (discovery from the Kubernetes API, the HPA
watch, leader election, the replica bridge, under churn) is `bench/bench_fleet_ops.py`'s, not repeated here.

Prints p50/p99; throughput as a ratio to the bare handler; the serving processes' CPU per request under
load, from /proc, and its ratio to the bare handler's: throughput per serving core, which the load
generator's own speed does not cap (a Python client on the next core cannot saturate a server); the
adapter's time per refresh (its own self-metric) and memory (PSS of its processes). Absolute figures move
with whatever else the machine runs; the ratios are the figures to read. Plain script, no asserts:

    python bench/bench_fleet.py --runtimes 10,1000 [--seconds 4] [--hpa-seconds 8] [--rounds 2] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import multiprocessing
import multiprocessing.pool
import os
import random
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the fake Kubernetes API lives in tests/

import aiohttp  # noqa: E402
import trustme  # noqa: E402
import yaml  # noqa: E402
from aiohttp import web  # noqa: E402

from bench import stop_on_term  # noqa: E402
from bench.client_priority import client_priority_words, prioritize_this_process, prioritized  # noqa: E402
from tests.support.certificates import issue_cert  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.processes import serving_workers  # noqa: E402

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HEADERS = {"X-Remote-User": HPA_USER, "X-Remote-Group": "system:serviceaccounts"}
SCRAPER_USER, SCRAPER_TOKEN = "system:serviceaccount:monitoring:prometheus", "bench-prometheus-token"
"""Who reads the adapter's /metrics here: a token granted `get` on it, as Prometheus scrapes it in a cluster."""
METRICS = ("modelmesh_desired_replicas", "modelmesh_gpu_busy", "modelmesh_request_load", "modelmesh_cache_pressure")
NAMESPACE = "bench"
PODS_PER_RUNTIME = 2
STAMP = b"1234567890.5"
HPA_PERIOD_S = 15.0
HPA_CONNECTIONS = 16


def deployment(runtime: int) -> str:
    return f"modelmesh-serving-rt{runtime}"


def metric_path(runtime: int, metric: str) -> str:
    return (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/{metric}"
            f"?labelSelector=deployment%3D{deployment(runtime)}")


# Processes: the exporter fleet, the fake Kubernetes API, the bare handler.

def exporter_template(pod: int, names_pod: bool = True) -> tuple[bytes, ...]:
    """One exporter's output (1 GPU), split where its collection timestamp and its clock go: join the parts
    with the time of the response (`STAMP.join(parts)` for the placeholder). `names_pod`: it names pod number
    `pod` (`bench.fake_exporter.bench_pod`), which only a fleet whose pods are so named may serve: the adapter
    refuses an answer naming another pod of the Kubernetes API's (`other_pod`)."""
    from prometheus_client.utils import floatToGoString

    from bench.fake_exporter import exporter_text

    # The ModelMesh stamp and the exporter's clock are rewritten per response; the GPU collector's stamp is set
    # far ahead so that its signal always counts fresh in the benchmark.
    text = exporter_text(pod, gpus=1, modelmesh_stamp=float(STAMP), gpu_stamp=4e9, clock=float(STAMP),
                         names_pod=names_pod)
    stamp: str = floatToGoString(float(STAMP))  # type: ignore[no-untyped-call]
    parts = tuple(text.split(stamp.encode()))
    if len(parts) != 3:
        raise RuntimeError("the exporter text does not hold the timestamp placeholder twice")
    return parts


def write_targets(path: Path, runtimes: int, fleet_port: int) -> Path:
    """A targets file naming the fleet's pods, `PODS_PER_RUNTIME` a runtime, as `serve_fleet` numbers them."""
    path.write_text(yaml.safe_dump({"runtimes": [
        {"namespace": NAMESPACE, "deployment": deployment(r),
         "pods": [{"name": f"rt{r}-pod{i}",
                   "url": f"http://127.0.0.1:{fleet_port}/pod/{r * PODS_PER_RUNTIME + i}/metrics"}
                  for i in range(PODS_PER_RUNTIME)]} for r in range(runtimes)]}))
    return path


class _FleetProtocol(asyncio.Protocol):
    """Every fake exporter behind one port, answering `GET /pod/N/metrics` with pod N's text, a fresh collection
    timestamp and the exporter's clock, keep-alive. A bare protocol rather than an aiohttp app: on the benchmark's
    machine the fleet's CPU is taken from the adapter's cores, whereas real exporters run on other nodes, so the
    fake fleet should cost as little as it can (about a fifth of an aiohttp handler per scrape)."""

    def __init__(self, templates: list[tuple[bytes, ...]]) -> None:
        self.templates = templates
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4:]
            target = head.split(b" ", 2)[1]  # GET /pod/N/metrics HTTP/1.1 (the adapter sends no body)
            parts = target.split(b"/")
            if len(parts) != 4 or parts[1] != b"pod" or not parts[2].isdigit() or int(parts[2]) >= len(self.templates):
                self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            body = repr(time.time()).encode().join(self.templates[int(parts[2])])
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)


def serve_fleet(pods: int, ports: multiprocessing.Queue[int]) -> None:
    templates = [exporter_template(pod) for pod in range(pods)]

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(
            lambda: _FleetProtocol(templates), "127.0.0.1", 0, backlog=4096)
        ports.put(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(run())


def serve_kube(workdir: Path, ports: multiprocessing.Queue[int]) -> None:
    async def run() -> None:
        from autoscaler.names import API_GROUP
        from tests.fakes.kube import FakeKubeApi

        async with FakeKubeApi() as kube:
            kube.allow(user=HPA_USER, verb="list", group=API_GROUP)
            kube.tokens[SCRAPER_TOKEN] = (SCRAPER_USER, ["system:serviceaccounts"])
            kube.allow(user=SCRAPER_USER, verb="get", path="/metrics")
            kube.write_kubeconfig(workdir / "kubeconfig")
            ports.put(kube.port)
            await asyncio.Event().wait()

    asyncio.run(run())


def server_tls(workdir: Path) -> ssl.SSLContext:
    """The serving side of TLS as the adapter has it: `server.pem`, client certificates from the front-proxy CA."""
    from autoscaler.api.certs import server_context
    from autoscaler.api.client_certs import CertificateAuthorities, trust_client_certificates

    context = server_context(workdir / "server.pem", workdir / "server.pem")
    trust_client_certificates(context, CertificateAuthorities.from_pem((workdir / "front-proxy-ca.pem").read_bytes(),
                                                                       "bench"))
    return context


def bare_app(body: bytes) -> web.Application:
    """The baseline: a bare aiohttp handler returning the same bytes on the external-metrics route."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}", handler)
    return app


def serve_bare(workdir: Path, body: bytes, ports: multiprocessing.Queue[int]) -> None:
    asyncio.run(listen(bare_app(body), server_tls(workdir), ports))


async def listen(app: web.Application, tls: ssl.SSLContext | None, ports: multiprocessing.Queue[int]) -> None:
    """Serve `app` on a free loopback port, put the port on `ports`, and serve until terminated."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls, backlog=4096).start()
    ports.put(runner.addresses[0][1])
    await asyncio.Event().wait()


def start(target: object, *args: object) -> tuple[multiprocessing.process.BaseProcess, int]:
    spawn = multiprocessing.get_context("spawn")
    ports: multiprocessing.Queue[int] = spawn.Queue()
    process = spawn.Process(target=target, args=(*args, ports), daemon=True)  # type: ignore[arg-type]
    process.start()
    return process, ports.get(timeout=120)


# Clients.

NO_ANSWER = 0
"""The key under which `Answers.not_2xx` counts requests that got no answer (connection or client errors)."""
FLAG_SHARE = 0.01
"""Above this share of answers not 2xx a run's latencies are flagged: a 503 is answered faster than a value is
served, and ab's percentiles cannot leave them out, so its p50 / p99 would read as a server doing well."""


@dataclass
class Answers:
    """What came back, by status: the run goes on past answers that are not 2xx and counts them, as ab and wrk
    do, rather than aborting with no figures. 2xx answers are `total` less the others."""

    total: int = 0
    not_2xx: Counter[int] = field(default_factory=Counter)

    def add(self, status: int) -> None:
        self.total += 1
        if not 200 <= status < 300:
            self.not_2xx[status] += 1

    def merge(self, other: Answers) -> None:
        self.total += other.total
        self.not_2xx.update(other.not_2xx)

    @property
    def share(self) -> float:
        return sum(self.not_2xx.values()) / self.total if self.total else 0.0

    @property
    def flagged(self) -> bool:
        return self.share > FLAG_SHARE

    def words(self) -> str:
        """`503 x 1,234, no answer x 2 of 40,000 (3.1%)`, or `none of 40,000`."""
        if not self.not_2xx:
            return f"none of {self.total:,}"
        parts = ", ".join(f"{'no answer' if status == NO_ANSWER else status} x {count:,}"
                          for status, count in sorted(self.not_2xx.items()))
        return f"{parts} of {self.total:,} ({self.share:.1%})"


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)
    """Latencies of 2xx answers only from the Python client; of every answer from ab (its table mixes them)."""
    throughputs: list[float] = field(default_factory=list)
    cpu_per_request: list[float] = field(default_factory=list)  # seconds of the serving processes' CPU
    answers: Answers = field(default_factory=Answers)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def urls(base: str, runtimes: int) -> list[str]:
    paths = [base + metric_path(runtime, metric) for runtime in range(runtimes) for metric in METRICS]
    random.Random(1).shuffle(paths)
    return paths


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes have used so far (/proc, in clock ticks)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)
    return total / os.sysconf("SC_CLK_TCK")


def serving_cpus(args: argparse.Namespace) -> set[int]:
    """The CPUs the serving processes share: one per serving worker of the adapter, from `--serving-cpu` on. All
    on one CPU, `--workers 2` measured two processes taking turns on a core, not what a second worker buys."""
    return set(range(args.serving_cpu, args.serving_cpu + max(1, args.workers)))


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of the process onto `cpus` (the affinity of a pid is its main thread's alone)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), cpus)


def proportional_mib(pids: list[int]) -> float:
    """The processes' memory as a container's limit counts it: proportional set size, shared pages (the
    snapshot's shared memory) counted once in all."""
    total_kib = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


async def load(targets: list[str], client: ssl.SSLContext, seconds: float, concurrency: int, into: Sample,
               serving: list[int] | None = None) -> None:
    connector = aiohttp.TCPConnector(ssl=client, limit=concurrency)
    count = 0
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker(offset: int) -> None:
            nonlocal count
            index = offset
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    async with session.get(targets[index % len(targets)], headers=HEADERS) as response:
                        await response.read()
                        status = response.status
                except aiohttp.ClientError:
                    status = NO_ANSWER
                into.answers.add(status)
                if 200 <= status < 300:  # an error's latency is not a served value's
                    into.latencies.append(time.perf_counter() - started)
                count += 1
                index += concurrency

        started, cpu = time.perf_counter(), cpu_seconds(serving or [])
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        into.throughputs.append(count / (time.perf_counter() - started))
        if serving:
            into.cpu_per_request.append((cpu_seconds(serving) - cpu) / max(1, count))


async def load_ab(target: str, workdir: Path, seconds: float, concurrency: int, into: Sample,
                  serving: list[int] | None = None) -> None:
    """The load run from ApacheBench instead of the Python client (`bench.apachebench`): it needs a fraction of
    the Python client's CPU, so the jitter of the core the clients share with the fake fleet and the refresh
    stays out of the p99. `ab` asks for one URL: one runtime's metric, again and again."""
    from bench.apachebench import run_ab

    cpu = cpu_seconds(serving or [])
    run = await asyncio.to_thread(run_ab, target, workdir / "front-proxy-client.pem", HEADERS, seconds, concurrency)
    into.throughputs.append(run.requests / run.seconds)
    into.latencies += run.percentiles_s
    into.answers.merge(Answers(run.requests + run.failed, run.not_2xx + Counter({NO_ANSWER: run.failed})))
    if serving:
        into.cpu_per_request.append((cpu_seconds(serving) - cpu) / max(1, run.requests))


@dataclass
class Paced:
    """What the HPA-paced clients saw: latency from send, and how late each send was against its schedule.

    Lateness is the client's own delay (its event loop or core was busy): when it grows, the figures measure
    the client, not the server."""

    latencies: list[float] = field(default_factory=list)
    """Of 2xx answers only."""
    lateness: list[float] = field(default_factory=list)
    answers: Answers = field(default_factory=Answers)
    scheduled: int = 0

    def percentile(self, q: float, of: str = "latencies") -> float:
        ordered = sorted(getattr(self, of))
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    def merge(self, other: tuple[list[float], list[float], dict[int, int], int]) -> None:
        latencies, lateness, statuses, scheduled = other
        self.latencies += latencies
        self.lateness += lateness
        for status, count in statuses.items():
            self.answers.total += count
            if not 200 <= status < 300:
                self.answers.not_2xx[status] += count
        self.scheduled += scheduled


def write_pki(workdir: Path) -> ssl.SSLContext:
    """Fresh CAs and certificates in `workdir`, as a cluster has them: the adapter's serving certificate
    (`server.pem`, its CA `server-ca.pem`), the front-proxy CA (`front-proxy-ca.pem`) and the aggregator's client
    certificate from it (`front-proxy-client.pem`); returns the aggregator's side of TLS."""
    server_ca, proxy_ca = trustme.CA(), trustme.CA()
    issue_cert(server_ca, "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(workdir / "server.pem"))
    server_ca.cert_pem.write_to_path(str(workdir / "server-ca.pem"))
    proxy_ca.cert_pem.write_to_path(str(workdir / "front-proxy-ca.pem"))
    proxy = issue_cert(proxy_ca, common_name="front-proxy-client")
    proxy.private_key_and_cert_chain_pem.write_to_path(str(workdir / "front-proxy-client.pem"))
    return client_context(workdir)


def client_context(workdir: Path) -> ssl.SSLContext:
    """The aggregator's side of TLS, rebuilt from files so that each client process has its own."""
    context = ssl.create_default_context(cafile=str(workdir / "server-ca.pem"))
    context.load_cert_chain(str(workdir / "front-proxy-client.pem"))
    return context


def hpa_share(workdir: str, targets: list[str], share: int, shares: int, rate: float, begin_at: float,
              seconds: float, connections: int) -> tuple[list[float], list[float], dict[int, int], int]:
    """One client process: sends requests share, share + shares, ... of the fleet-wide schedule (request i at
    begin_at + i / rate, wall clock shared by all processes) over its own connections. The garbage collector
    is off for the run: a collection in the client would be a late send, the client's own tail."""
    gc.disable()
    try:
        return asyncio.run(_hpa_share(Path(workdir), targets, share, shares, rate, begin_at, seconds, connections))
    finally:
        gc.enable()


async def _hpa_share(workdir: Path, targets: list[str], share: int, shares: int, rate: float, begin_at: float,
                     seconds: float, connections: int) -> tuple[list[float], list[float], dict[int, int], int]:
    latencies: list[float] = []
    lateness: list[float] = []
    statuses: Counter[int] = Counter()  # NO_ANSWER for a client error
    connector = aiohttp.TCPConnector(ssl=client_context(workdir), limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(url: str, due: float) -> None:
            started = time.perf_counter()
            lateness.append(max(0.0, started - due))
            try:
                async with session.get(url, headers=HEADERS) as response:
                    await response.read()
                    statuses[response.status] += 1
            except aiohttp.ClientError:
                statuses[NO_ANSWER] += 1
                return
            if 200 <= response.status < 300:  # an error's latency is not a served value's
                latencies.append(time.perf_counter() - started)

        # Open this process's connections before the schedule starts, as the aggregator holds its connections to
        # an extension API server open: a TLS handshake inside a measured request is not what an HPA feels (at 10
        # runtimes, 40 requests a 15 s, the handshakes alone would be the p99).
        await asyncio.gather(*(_warm(session, targets[i % len(targets)]) for i in range(connections)))
        # perf_counter is per process; convert the shared wall-clock start once.
        began = time.perf_counter() + (begin_at - time.time())
        total = max(1, int(rate * seconds))
        tasks = []
        for i in range(share, total, shares):
            due = began + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(targets[i % len(targets)], due)))
        await asyncio.gather(*tasks)
    return latencies, lateness, dict(statuses), len(tasks)


async def _warm(session: aiohttp.ClientSession, url: str) -> None:
    async with session.get(url, headers=HEADERS) as response:
        await response.read()


def hpa_pace(pool: multiprocessing.pool.Pool, workdir: Path, targets: list[str], seconds: float, clients: int,
             into: Paced, rate: float | None = None) -> None:
    """Open loop: request i is sent at i / rate whatever happened to the others, as independent HPAs do; the
    schedule is dealt round-robin to `clients` processes, HPA_CONNECTIONS connections shared among them.
    `rate` None: the fleet's own HPA pace, every target once per HPA_PERIOD_S."""
    rate = rate or len(targets) / HPA_PERIOD_S
    connections = max(2, HPA_CONNECTIONS // clients)
    begin_at = time.time() + 1.0  # every process is already started: only the hand-off and warm-up ahead
    shares = pool.starmap(hpa_share, [(str(workdir), targets, share, clients, rate, begin_at, seconds, connections)
                                      for share in range(clients)])
    for result in shares:
        into.merge(result)


# A CPU limit, as a pod's.

@dataclass
class CpuLimit:
    """The adapter's processes in a CPU cgroup (v1) with a CFS quota, as the kubelet sets `limits.cpu`: when
    the refresh process and the serving workers together use the quota within a 100 ms period, all of them
    wait for the next period, however much the machine has idle."""

    path: Path

    @classmethod
    def create(cls, cores: float) -> CpuLimit:
        root = Path("/sys/fs/cgroup/cpu")
        if not (root / "cgroup.procs").exists():
            raise SystemExit("--cpu-limit needs the cgroup v1 cpu controller at /sys/fs/cgroup/cpu (and root)")
        path = root / f"bench-fleet-{os.getpid()}"
        path.mkdir(exist_ok=True)
        period = int((path / "cpu.cfs_period_us").read_text())
        (path / "cpu.cfs_quota_us").write_text(str(int(cores * period)))
        return cls(path)

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def throttled(self) -> str:
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return (f"throttled in {stat['nr_throttled']} of {stat['nr_periods']} periods, "
                f"{int(stat['throttled_time']) / 1e9:.1f} s in all")

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


# One fleet size.

MIN_REFRESH_S = 15.0
"""The shortest refresh interval the bench picks: the adapter's default, still short enough that refreshes run
during the rounds. At 5 s even 100 runtimes lost 51 of 5,400 scrapes to the deadline (2 December 2026, the
machine at load 4-5): the same-rate run's 1,333 requests a second keep the raised-priority clients on the
refresh's core at every fleet size, and a refresh caught behind them for most of 5 s misses its deadline."""
REFRESH_S_PER_POD = 0.006
"""What the bench gives the refresh per pod. A scrape's deadline is the refresh interval; a pod that misses it
is retried after a backoff and after the pods not failing, so on a starved core it misses again, its runtime's
values go stale (three intervals) and the adapter rightly answers 503. Here the refresh process runs at its
lower priority on the core it shares with the raised-priority clients and the fake fleet: 1.2-2.4 ms a pod
(2.4-4.8 s at 2,000 pods, 11-16 s at 10,000; 0.3 ms with a core, `bench_refresh_process.py`), so 6 ms leaves it
more than twice that. At a fixed 5 s, 1,000 runtimes were at the edge and 5,000 lost runtimes mid-run: refreshes
of 11.3 s, samples older than the three intervals the adapter calls fresh, 2,736 of 5,000 runtimes unknown."""


@dataclass(frozen=True)
class RefreshPlan:
    """The adapter's refresh and scrape settings for one fleet size, printed with its row."""

    interval_s: float
    scrape_timeout_s: float
    scrape_concurrency: int

    @classmethod
    def for_fleet(cls, pods: int, interval_s: float | None, scrape_timeout_s: float | None,
                  scrape_concurrency: int) -> RefreshPlan:
        """`interval_s` None: long enough for `pods` on this bench's shared core (`REFRESH_S_PER_POD`). The
        scrape timeout defaults to the interval: a scrape slowed by a starved core, not a dead exporter, should
        not be cut off and put into backoff before the refresh's own deadline."""
        interval = interval_s or max(MIN_REFRESH_S, float(math.ceil(REFRESH_S_PER_POD * pods)))
        return cls(interval, scrape_timeout_s or interval, scrape_concurrency)

    def flags(self) -> list[str]:
        return ["--refresh-interval", f"{self.interval_s:g}", "--scrape-timeout", f"{self.scrape_timeout_s:g}",
                "--scrape-concurrency", str(self.scrape_concurrency)]

    def words(self) -> str:
        return (f"refresh every {self.interval_s:g} s, scrape timeout {self.scrape_timeout_s:g} s, "
                f"{self.scrape_concurrency} scrapes at once")


@dataclass
class FleetHealth:
    """Whether the adapter kept up with the fake fleet, from its own /metrics: the mean refresh, the scrapes
    tried and those cut off, and the runtimes whose values it did not know (answered 503) when read."""

    refresh_s: float = float("nan")
    scrapes: int = 0
    timeouts: int = 0
    unknown: int = 0

    @classmethod
    def read(cls, base: str, client: ssl.SSLContext) -> FleetHealth:
        scrape = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {SCRAPER_TOKEN}"})
        with urllib.request.urlopen(scrape, context=client, timeout=30) as response:
            text = response.read().decode()

        def value(pattern: str) -> float:
            found = re.search(rf"^{pattern} (\S+)$", text, re.M)
            return float(found.group(1)) if found else 0.0

        count = value("modelmesh_autoscaler_refresh_duration_seconds_count")
        return cls(refresh_s=value("modelmesh_autoscaler_refresh_duration_seconds_sum") / count if count
                   else float("nan"),
                   scrapes=int(value(r'modelmesh_autoscaler_source_reads_total\{source="scrape"\}')),
                   timeouts=int(value(r'modelmesh_autoscaler_source_errors_total\{reason="timeout",source="scrape"\}')),
                   unknown=len(re.findall(r"^modelmesh_autoscaler_runtime_values_known\{[^}]*\} 0\.0$", text, re.M)))

    def kept_up(self, plan: RefreshPlan) -> bool:
        return self.timeouts == 0 and self.unknown == 0 and self.refresh_s < plan.interval_s

    def words(self, plan: RefreshPlan) -> str:
        late = "" if self.kept_up(plan) else " ⚠"
        return (f"{self.refresh_s:.2f} s of {plan.interval_s:g}; {self.timeouts:,} of {self.scrapes:,} scrapes cut "
                f"off; {self.unknown:,} runtimes unknown at the end{late}")


async def wait_known(base: str, client: ssl.SSLContext, timeout_s: float) -> int:
    """Until the adapter knows every runtime's values (none answered 503 for want of data): the first refresh
    of a big fleet can leave pods for the next, and a round started then would count the warm-up's 503s.
    Returns how many are still unknown after `timeout_s`: the rounds run anyway, and the row counts the 503s
    and says that the adapter did not keep up, rather than ending the bench with no figures."""
    deadline = time.monotonic() + timeout_s
    while (health := await asyncio.to_thread(FleetHealth.read, base, client)).unknown:
        if time.monotonic() >= deadline:
            return health.unknown
        await asyncio.sleep(1.0)
    return 0


async def wait_served(url: str, client: ssl.SSLContext, timeout_s: float) -> bytes:
    deadline = time.monotonic() + timeout_s
    last = ""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client)) as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url, headers=HEADERS) as response:
                    body = await response.read()
                    if response.status == 200:
                        return body
                    last = f"{response.status} {body[:200]!r}"
            except aiohttp.ClientError as error:
                last = str(error)
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{url} not served within {timeout_s:g} s: {last}")


async def measure(args: argparse.Namespace, runtimes: int, workdir: Path, client: ssl.SSLContext,
                  pool: multiprocessing.pool.Pool) -> dict[str, object]:
    pods = runtimes * PODS_PER_RUNTIME
    plan = RefreshPlan.for_fleet(pods, args.refresh_interval, args.scrape_timeout, args.scrape_concurrency)
    fleet, fleet_port = start(serve_fleet, pods)
    kube, _ = start(serve_kube, workdir)
    targets = write_targets(workdir / f"targets-{runtimes}.yaml", runtimes, fleet_port)
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    log = open(workdir / f"adapter-{runtimes}.log", "wb")  # noqa: SIM115
    limit = CpuLimit.create(args.cpu_limit) if args.cpu_limit else None
    adapter = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--tls-cert-file", str(workdir / "server.pem"), "--tls-private-key-file", str(workdir / "server.pem"),
         "--requestheader-client-ca-file", str(workdir / "front-proxy-ca.pem"),
         "--requestheader-allowed-names", "front-proxy-client", "--kubeconfig", str(workdir / "kubeconfig"),
         "--targets", str(targets), *plan.flags(), "--workers", str(args.workers), "--deletion-cost", "off",
         "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=limit.join if limit else None)  # before exec: the refresh process and its workers inside
    bare = None
    try:
        body = await wait_served(base + metric_path(runtimes - 1, METRICS[0]), client, 120 + runtimes / 20)
        if unknown := await wait_known(base, client, 60 + 3 * plan.interval_s):
            print(f"{runtimes:,} runtimes: {unknown:,} still unknown (503) after {60 + 3 * plan.interval_s:g} s; "
                  "measuring anyway", file=sys.stderr)
        bare, bare_port = start(serve_bare, workdir, body)
        bases = {"bare": f"https://127.0.0.1:{bare_port}", "adapter": base}
        serving = {"bare": [bare.pid or 0],
                   "adapter": serving_workers(adapter.pid) if args.workers else [adapter.pid]}
        if len(serving["adapter"]) != max(1, args.workers):
            raise RuntimeError(f"found serving workers {serving['adapter']} of the adapter, not {args.workers}")
        if args.serving_cpu is not None:
            for pid in serving["adapter"] + serving["bare"]:
                pin(pid, serving_cpus(args))
        loads = {name: Sample() for name in bases}
        paced = {name: Paced() for name in bases}
        same_rate = {name: Paced() for name in bases}
        for url in bases.values():  # warm-up: connections, caches, code paths
            await load(urls(url, runtimes), client, 1.0, args.concurrency, Sample())
        for _ in range(args.rounds):
            for name, url in bases.items():
                if args.load_client == "ab":
                    await load_ab(urls(url, runtimes)[0], workdir, args.seconds, args.concurrency, loads[name],
                                  serving[name])
                else:
                    with prioritized():
                        await load(urls(url, runtimes), client, args.seconds, args.concurrency, loads[name],
                                   serving[name])
                hpa_pace(pool, workdir, urls(url, runtimes), args.hpa_seconds, args.hpa_clients, paced[name])
                hpa_pace(pool, workdir, urls(url, runtimes), args.hpa_seconds, args.hpa_clients, same_rate[name],
                         args.same_rate)
        health = FleetHealth.read(base, client)
        memory = proportional_mib([adapter.pid, *serving["adapter"]]) if args.workers else \
            proportional_mib([adapter.pid])
    finally:
        adapter.terminate()
        adapter.wait(20)
        throttled = limit.throttled() if limit else ""
        if limit:
            limit.remove()
        log.close()
        for process in (fleet, kube, bare):
            if process is not None:
                process.terminate()
                process.join(5)
    return {"runtimes": runtimes, "pods": pods, "load": loads, "paced": paced, "same_rate": same_rate,
            "plan": plan, "health": health, "uptime": load_average(), "throttled": throttled,
            "memory_mib": memory}


def flagged_runs(row: dict[str, Any]) -> list[str]:
    """The row's runs whose answers were more than `FLAG_SHARE` not 2xx, in words: their latencies are not what
    an HPA asking for a value feels (ab's include the fast error answers; the Python clients' leave them out,
    but then the server did less than the run asked)."""
    runs = (("under load", "load"), ("at HPA pace", "paced"), ("at the same rate", "same_rate"))
    return [f"{name} {words}: {row[key][name].answers.words()}" for words, key in runs
            for name in ("adapter", "bare") if row[key][name].answers.flagged]


def warnings(row: dict[str, Any]) -> list[str]:
    """What makes a row's figures not what they seem, printed under the table."""
    runtimes = f"⚠ {row['runtimes']:,} runtimes"
    found = [f"{runtimes}, {run}: more than {FLAG_SHARE:.0%} of the answers were not 2xx; these latencies are not "
             "those of served values" for run in flagged_runs(row)]
    health: FleetHealth = row["health"]
    if not health.kept_up(row["plan"]):
        found.append(f"{runtimes}: the adapter did not keep up with the fake fleet ({health.words(row['plan'])}); "
                     "a longer --refresh-interval gives the shared core time to scrape it")
    return found


def report(row: dict[str, Any]) -> str:
    loads: dict[str, Sample] = row["load"]
    paced: dict[str, Paced] = row["paced"]
    same_rate: dict[str, Paced] = row["same_rate"]
    plan: RefreshPlan = row["plan"]
    health: FleetHealth = row["health"]
    ratio = statistics.median(loads["adapter"].throughputs) / statistics.median(loads["bare"].throughputs)

    def ms(sample: Sample | Paced, q: float, of: str = "latencies") -> str:
        return f"{sample.percentile(q, of) * 1000:.1f}" if isinstance(sample, Paced) \
            else f"{sample.percentile(q) * 1000:.1f}"

    def p50_p99(sample: Sample | Paced) -> str:
        """A run with too many answers not 2xx is marked where its figures are, not only in a column aside."""
        return f"{'⚠ ' if sample.answers.flagged else ''}{ms(sample, 0.5)} / {ms(sample, 0.99)} ms"

    def late(name: str) -> str:
        return f"{ms(paced[name], 0.5, 'lateness')} / {ms(paced[name], 0.99, 'lateness')} ms"

    def not_2xx(name: str) -> str:
        answers = Answers()
        for runs in (loads, paced, same_rate):
            answers.merge(runs[name].answers)
        return answers.words()

    adapter_cpu = statistics.median(loads["adapter"].cpu_per_request)
    bare_cpu = statistics.median(loads["bare"].cpu_per_request)
    return (f"| {row['runtimes']:,} ({row['pods']:,}) | {ratio:.2f} "
            f"| {adapter_cpu * 1e6:.0f} / {bare_cpu * 1e6:.0f} µs ({bare_cpu / adapter_cpu:.2f}) "
            f"| {p50_p99(loads['adapter'])} | {p50_p99(loads['bare'])} "
            f"| {p50_p99(paced['adapter'])} ({len(paced['adapter'].latencies)}) | {p50_p99(paced['bare'])} "
            f"| {p50_p99(same_rate['adapter'])} ({ms(same_rate['adapter'], 0.99, 'lateness')}) "
            f"| {p50_p99(same_rate['bare'])} ({ms(same_rate['bare'], 0.99, 'lateness')}) "
            f"| {late('adapter')} | {late('bare')} "
            f"| {health.words(plan)} | {row['memory_mib']:.0f} MiB "
            f"| {not_2xx('adapter')} | {not_2xx('bare')} | {row['uptime']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runtimes", default="10,100,1000,5000", help="comma list of fleet sizes")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of one load run")
    parser.add_argument("--hpa-seconds", type=float, default=8.0, help="length of one HPA-paced run")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds per server")
    parser.add_argument("--hpa-clients", type=int, default=4,
                        help="client processes sharing the HPA-paced schedule, each with its own connections")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="keep-alive connections of the load run (default 10, wrk's default)")
    parser.add_argument("--load-client", choices=("python", "ab"), default=None,
                        help="the load run's client: ApacheBench on one runtime's metric (ab, from Debian's "
                        "apache2-utils: C, a fraction of the CPU, at a raised priority where allowed; the default "
                        "where ab is installed), or aiohttp over every runtime x metric (python: its own core's "
                        "queue adds to the p99)")
    parser.add_argument("--workers", type=int, default=1, help="the adapter's --workers")
    parser.add_argument("--refresh-interval", type=float, default=None,
                        help="the adapter's refresh interval (default: per fleet size, short so that refreshes run "
                        f"during the rounds, long enough that every pod is scraped in time on this bench's shared "
                        f"core: {REFRESH_S_PER_POD * 1000:g} ms a pod, at least {MIN_REFRESH_S:g} s)")
    parser.add_argument("--scrape-timeout", type=float, default=None,
                        help="the adapter's --scrape-timeout (default: the refresh interval, so that a scrape slowed "
                        "by the shared core is not cut off before the refresh's deadline)")
    parser.add_argument("--scrape-concurrency", type=int, default=64, help="the adapter's --scrape-concurrency")
    parser.add_argument("--cpu-limit", type=float, default=None,
                        help="run the adapter (refresh process and workers) under this many cores of CFS quota, "
                        "as a pod's limits.cpu (cgroup v1, root)")
    parser.add_argument("--serving-cpu", type=int, default=None,
                        help="give the serving processes (the adapter's workers, the bare handler) this CPU alone, "
                        "and the next ones with --workers N (N CPUs from this one), and everything else "
                        "(clients, fake fleet, the adapter's refresh) the others, as the adapter's pod has a core "
                        "per worker and one for its refresh (default 0 where there is at least one CPU more than "
                        "the workers; -1: no pinning, everything shares every CPU)")
    parser.add_argument("--same-rate", type=float, default=None,
                        help="requests a second of the same-rate run, alike for every fleet size so that only the "
                        "fleet's size differs (default: the largest fleet's HPA pace)")
    args = parser.parse_args()
    sizes = [int(part) for part in args.runtimes.split(",") if part.strip()]
    if args.load_client == "ab" and not shutil.which("ab"):
        parser.error("--load-client ab: no `ab` on the PATH (apt-get install -y apache2-utils)")
    if args.load_client is None:
        args.load_client = "ab" if shutil.which("ab") else "python"
        if args.load_client == "python":
            print("no `ab` on the PATH (apt-get install -y apache2-utils): the load run uses the Python client, "
                  "whose own core adds to the p99 under load")
    if args.serving_cpu is None:
        args.serving_cpu = 0 if len(os.sched_getaffinity(0)) > max(1, args.workers) else -1
    if args.serving_cpu < 0:
        args.serving_cpu = None
    if args.serving_cpu is not None:
        wanted = serving_cpus(args)
        others = os.sched_getaffinity(0) - wanted
        if not wanted <= os.sched_getaffinity(0) or not others:
            parser.error(f"--serving-cpu {args.serving_cpu} with --workers {args.workers}: needs CPUs "
                         f"{','.join(map(str, sorted(wanted)))} and at least one other (-1: no pinning)")
        os.sched_setaffinity(0, others)  # what this process starts inherits it
    args.same_rate = args.same_rate or max(sizes) * len(METRICS) / HPA_PERIOD_S
    plans = {runtimes: RefreshPlan.for_fleet(runtimes * PODS_PER_RUNTIME, args.refresh_interval,
                                             args.scrape_timeout, args.scrape_concurrency) for runtimes in sizes}
    print(f"adapter --workers {args.workers}, "
          + "; ".join(f"{runtimes:,} runtimes: {plan.words()}" for runtimes, plan in plans.items())
          + f"; auth on (front-proxy "
          f"certificate + SubjectAccessReview); load: {args.concurrency} connections x {args.seconds:g} s from "
          f"{'ab, one URL' if args.load_client == 'ab' else 'aiohttp over every runtime x metric'}; HPA "
          f"pace: runtimes x 4 / 15 s for {args.hpa_seconds:g} s from {args.hpa_clients} client processes; "
          f"{args.rounds} interleaved rounds; same rate: {args.same_rate:g} requests a second at every size"
          + (f"; the adapter under a CPU limit of {args.cpu_limit:g} cores" if args.cpu_limit else "")
          + (f"; serving alone on CPUs {','.join(map(str, sorted(serving_cpus(args))))}"
             if args.serving_cpu is not None else "")
          + f"; {client_priority_words()}")
    print("| runtimes (pods) | throughput vs bare | serving CPU a request, adapter / bare (throughput per core "
          "vs bare) | adapter p50 / p99 under load | bare p50 / p99 under load "
          "| adapter p50 / p99 at HPA pace (requests) | bare p50 / p99 at HPA pace "
          "| adapter p50 / p99 at the same rate (client lateness p99) | bare p50 / p99 at the same rate (lateness p99) "
          "| client lateness p50 / p99 (adapter) | client lateness p50 / p99 (bare) "
          "| time per refresh of the interval; scrapes cut off; runtimes unknown | adapter memory (PSS) "
          "| adapter's answers not 2xx | bare's answers not 2xx | load average after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as directory:
        workdir = Path(directory)
        client = write_pki(workdir)
        with multiprocessing.get_context("spawn").Pool(args.hpa_clients, prioritize_this_process) as pool:
            for runtimes in sizes:
                rows.append(asyncio.run(measure(args, runtimes, workdir, client, pool)))
                print(report(rows[-1]), flush=True)
                if rows[-1]["throttled"]:
                    print(f"<!-- adapter under a {args.cpu_limit:g}-core CPU limit: {rows[-1]['throttled']} -->")
    for row in rows:
        for warning in warnings(row):
            print(warning)
    print(flatness(rows))
    print(f"machine: {os.cpu_count()} cores, load average {load_average()} at the end (other work on the same "
          "cores moves every figure; compare ratios)")


def flatness(rows: list[dict[str, Any]]) -> str:
    """How much the adapter's p99 moves across fleet sizes (the goal: within 2x), beside the bare handler's."""
    def spread(of: str, name: str) -> str:
        p99s = [row[of][name].percentile(0.99) * 1000 for row in rows]
        flagged = sum(row[of][name].answers.flagged for row in rows)
        return (f"{min(p99s):.1f}-{max(p99s):.1f} ms ({max(p99s) / min(p99s):.1f}x)"
                + (f" ⚠ {flagged} flagged row(s)" if flagged else ""))

    sizes = f"{rows[0]['runtimes']:,} to {rows[-1]['runtimes']:,} runtimes" if rows else "no fleet"
    return (f"p99 from {sizes}: at HPA pace adapter {spread('paced', 'adapter')}, bare {spread('paced', 'bare')}; "
            f"at the same rate adapter {spread('same_rate', 'adapter')}, bare {spread('same_rate', 'bare')}")


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    stop_on_term.run(main)
