"""What the platform engineer sees of the adapter at fleet size: its own `/metrics`, its log and its operator
endpoints, with runtimes discovered in Kubernetes and normal churn.

One process runs the fake Kubernetes API (`tests.fakes.kube`) with `--runtimes` ModelMesh runtimes of 2 pods,
an HPA each, and the churn: every `--churn-every` seconds one pod is replaced (deleted, a new one with a new IP
created) and one HPA's maxReplicas changed; one pod in a hundred is given an exporter that fails (HTTP 500).
Another process answers every pod's exporter on one port: pod IPs are loopback addresses (127.x.y.z), so the
one server knows which pod was scraped by the address it was reached on. The adapter runs as `serve` with
`--kubeconfig` (discovery, leader election, deletion costs and the bridge on), at INFO.

After the first refresh, and again at the end of `--seconds` of churn, prints: `/metrics` bytes, series (by
family, largest first) and time to fetch; `/debug/runtimes/...` size and time; the log's lines and bytes,
its longest line, and lines a refresh projected to lines an hour, with the most repeated line shapes. Plain
script, no asserts:

    python bench/bench_fleet_ops.py --runtimes 1000 [--seconds 120] [--refresh-interval 15] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import random
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to churn")
    parser.add_argument("--churn-every", type=float, default=2.0, help="seconds between pod replacements")
    parser.add_argument("--refresh-interval", type=float, default=15.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="write the adapter's log etc. here and keep them")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from bench import stop_on_term  # noqa: E402
from bench.bench_fleet import exporter_template, start  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

NAMESPACE = "bench"
FAILING = "127.9."  # pods at these addresses have an exporter that answers 500


def pod_ip(number: int) -> str:
    return f"127.{1 + number // 62500}.{number // 250 % 250}.{number % 250 + 2}"


class _Exporters(asyncio.Protocol):
    """Every pod's exporter on one port, told apart by the local address the adapter connected to."""

    def __init__(self, templates: list[tuple[bytes, ...]]) -> None:
        self.templates = templates
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.index = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        address = transport.get_extra_info("sockname")[0]
        self.failing = address.startswith(FAILING)
        self.index = sum(int(part) for part in address.split(".")) % len(self.templates)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            self.buffer = self.buffer[end + 4:]
            if self.failing:
                self.transport.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
                continue
            body = repr(time.time()).encode().join(self.templates[self.index])
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)


def serve_exporters(port: int, ports: multiprocessing.Queue[int]) -> None:
    # 50 outputs shared by address, so none can name the pod it answers for: named, every answer named another
    # pod than the Kubernetes API's at that address and was refused (`other_pod`), and a fleet of failing scrapes
    # was measured. They name none, as a sidecar from before the pod line (bench_scrape.py measures that line).
    templates = [exporter_template(pod, names_pod=False) for pod in range(50)]

    async def run() -> None:
        await asyncio.get_running_loop().create_server(lambda: _Exporters(templates), "0.0.0.0", port, backlog=4096)
        ports.put(port)
        await asyncio.Event().wait()

    asyncio.run(run())


def serve_kube_with_churn(workdir: str, runtimes: int, churn_every_s: float,
                          ports: multiprocessing.Queue[int]) -> None:
    from tests.fakes.kube import FakeKubeApi

    async def run() -> None:
        async with FakeKubeApi() as kube:
            numbers = iter(range(10**6))
            selector = {"modelmesh-service": "modelmesh-serving"}
            pods: dict[str, list[str]] = {}
            for runtime in range(runtimes):
                name = f"modelmesh-serving-rt{runtime}"
                kube.add_deployment(NAMESPACE, name, 2, labels={**selector, "name": name},
                                    selector={**selector, "name": name})
                pods[name] = []
                for replica in range(2):
                    pod = f"{name}-5d9c8b7f6-{next(numbers)}"
                    number = next(numbers)
                    ip = f"{FAILING}{number // 250 % 250}.{number % 250 + 2}" if runtime % 100 == 99 and replica \
                        else pod_ip(number)
                    kube.add_pod(NAMESPACE, pod, labels={**selector, "name": name}, ip=ip)
                    pods[name].append(pod)
                kube.add_hpa(NAMESPACE, f"{name}-hpa", max_replicas=10, min_replicas=1,
                             target=("RuntimeScale", name), metric_selector={"deployment": name})
                kube.add_serving_runtime(NAMESPACE, name.removeprefix("modelmesh-serving-"), replicas=2)
                kube.add_runtime_scale(NAMESPACE, name.removeprefix("modelmesh-serving-"), replicas=2)
            kube.write_kubeconfig(Path(workdir) / "kubeconfig", namespace=NAMESPACE)
            ports.put(kube.port)
            while not (Path(workdir) / "churn").exists():  # the adapter has served its first refreshes
                await asyncio.sleep(0.5)
            rng = random.Random(1)
            while True:
                await asyncio.sleep(churn_every_s)
                name = f"modelmesh-serving-rt{rng.randrange(runtimes)}"
                kube.delete_pod(NAMESPACE, pods[name].pop(0))
                pod = f"{name}-5d9c8b7f6-{next(numbers)}"
                kube.add_pod(NAMESPACE, pod, labels={**selector, "name": name}, ip=pod_ip(next(numbers)))
                pods[name].append(pod)
                kube.set_hpa_bounds(NAMESPACE, f"modelmesh-serving-rt{rng.randrange(runtimes)}-hpa",
                                    max_replicas=rng.randrange(5, 20), min_replicas=1)

    asyncio.run(run())


def fetch(url: str) -> tuple[bytes, float]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    started = time.perf_counter()
    with urllib.request.urlopen(url, context=context, timeout=120) as answer:
        body: bytes = answer.read()
    return body, time.perf_counter() - started


def shape(line: str) -> str:
    """A log line without its time and numbers, so that the same message about different runtimes counts once."""
    return re.sub(r"\d+", "#", line[24:])[:150]


def report_metrics(base: str) -> None:
    body, seconds = fetch(f"{base}/metrics")
    series = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    families = collections.Counter(line.split("{")[0].split(" ")[0] for line in series)
    print(f"  /metrics: {len(body) / 1024:.0f} KiB, {len(series)} series, {seconds * 1000:.0f} ms")
    for name, count in families.most_common(6):
        print(f"    {count:7d} {name}")
    totals = dict(re.findall(r"^modelmesh_autoscaler_refresh_duration_seconds_(sum|count) (\S+)$", body.decode(),
                             re.MULTILINE))
    failed: collections.Counter[str] = collections.Counter()
    for reason, count in re.findall(r'^modelmesh_autoscaler_source_errors_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$',
                                    body.decode(), re.MULTILINE):
        failed[reason] += int(float(count))
    # What failed, by reason: the fleet's 1% of failing pods are meant to; a fleet failing for another reason
    # measures something else (every answer refused as `other_pod` did, unseen, for a release)
    print(f"  scrapes failed: {dict(failed.most_common()) or 'none'}")
    if float(totals.get("count", 0)):  # cluster mode's whole refresh: discovery, scrapes, decisions, rendering
        print(f"  refreshes: {float(totals['count']):.0f}, {float(totals['sum']) / float(totals['count']):.2f} s "
              "each on average")
    body, seconds = fetch(f"{base}/debug/runtimes/{NAMESPACE}/modelmesh-serving-rt1")
    print(f"  /debug/runtimes/{NAMESPACE}/modelmesh-serving-rt1: {len(body)} bytes, {seconds * 1000:.0f} ms")


def report_log(log: Path, since: int, seconds: float, refresh_interval_s: float) -> None:
    lines = log.read_text(errors="replace").splitlines()[since:]
    longest = max((len(line) for line in lines), default=0)
    print(f"  log: {len(lines)} lines, {sum(map(len, lines)) / 1024:.0f} KiB in {seconds:.0f} s "
          f"({len(lines) * 3600 / max(seconds, 1):.0f} lines an hour at this pace), longest line {longest} chars")
    for text, count in collections.Counter(shape(line) for line in lines).most_common(8):
        print(f"    {count:6d} {text[:140]}")


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-ops-") as temporary:
        directory = str(args.keep or temporary)
        workdir = Path(directory)
        workdir.mkdir(parents=True, exist_ok=True)
        exporter_port = free_port()
        exporters, _ = start(serve_exporters, exporter_port)
        started = time.monotonic()
        kube, _ = start(serve_kube_with_churn, directory, args.runtimes, args.churn_every)
        print(f"{args.runtimes} runtimes: fake API ready in {time.monotonic() - started:.0f} s")
        port = free_port()
        log = workdir / "adapter.log"
        with log.open("wb") as sink:
            adapter = subprocess.Popen(
                [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
                 "--kubeconfig", str(workdir / "kubeconfig"), "--namespaces", NAMESPACE, "--leader-elect", "true",
                 "--leader-elect-namespace", NAMESPACE,
                 # the fake API answers a fleet's lists slowly: longer Kubernetes timeouts (half the margin)
                 "--leader-elect-lease-duration", "60", "--leader-elect-renew-deadline", "45",
                 "--exporter-port", str(exporter_port),
                 "--refresh-interval", str(args.refresh_interval), "--workers", str(args.workers)],
                stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
        base = f"https://127.0.0.1:{port}"
        try:
            while True:
                try:
                    if fetch(f"{base}/readyz")[0]:
                        break
                except OSError:
                    time.sleep(1)
            while True:
                try:
                    fetch(f"{base}/debug/runtimes/{NAMESPACE}/modelmesh-serving-rt{args.runtimes - 1}")
                    break
                except OSError:
                    time.sleep(1)
            time.sleep(2 * args.refresh_interval)
            print("after start (two refreshes):")
            report_metrics(base)
            report_log(log, 0, time.monotonic() - started, args.refresh_interval)
            mark = len(log.read_text(errors="replace").splitlines())
            (workdir / "churn").touch()
            churn_started = time.monotonic()
            time.sleep(args.seconds)
            print(f"after {args.seconds:.0f} s of churn (a pod replaced and an HPA changed every "
                  f"{args.churn_every:g} s):")
            report_metrics(base)
            report_log(log, mark, time.monotonic() - churn_started, args.refresh_interval)
        finally:
            adapter.terminate()
            adapter.wait(60)
            kube.terminate()
            exporters.terminate()


if __name__ == "__main__":
    stop_on_term.run(main)
