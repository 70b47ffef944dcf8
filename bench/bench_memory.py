"""What the shipped Deployment's adapter holds in memory at fleet size, against the targets-file run the other
benches measure.

Two runs of `modelmesh-autoscaler serve` in this script, against the same fake fleet:

- shipped: the args of `manifests/base/deployment.yaml`, read from the file (Kubernetes discovery: the pod,
  HPA and RuntimeScale watches, the Deployment resync, leader election, the replica bridge, deletion costs,
  authentication), with only the listen address, the exporter port, the policy file (the ConfigMap's
  `policy.yaml`, written out) and `$(POD_NAMESPACE)` filled in, and `--kubeconfig` added, since it runs outside
  a cluster;
- targets (the baseline): the same args, but the fleet read from a targets file (`--targets`) as
  `bench/bench_fleet.py` runs it, with no leader election, bridge or deletion costs: what the sizing figures
  measured until 4 December 2026.

The fake Kubernetes API (`tests/fakes/kube`) holds N runtimes in `modelmesh-serving`, each a Deployment with 2
Ready pods, an HPA on a RuntimeScale, a ServingRuntime and a RuntimeScale, and the front-proxy CA in
`kube-system/extension-apiserver-authentication`. One process answers every pod's exporter (the same text as
bench_fleet.py's) at the pod's own address, so both runs scrape the same fleet over the same number of
connections. No HPA traffic: what is measured is what the adapter holds before any request comes.

Once `/readyz` answers, the RSS and PSS of each of the adapter's processes are read from `/proc` every second
for `--seconds` (long enough for a few refreshes and Deployment resyncs: 60 s and more at fleet size); the table
gives the peak of the sum over the processes (PSS, which counts pages the processes share once) and the RSS of
the refresh process and of the largest serving worker at that peak, and the ratio of each to the targets run.
`--workers N` adds `--workers=N` to both runs (the Deployment's args leave the default, 1).

A second table gives what the Kubernetes library costs a serving worker: a fresh interpreter that imports
what a worker imports, then the same with the library's configuration and client modules on top, as every
worker imported them to load its review connection before 5 December 2026 (the refresh process now loads it
and hands the workers plain facts: `autoscaler.kube.review_connection`); the ratio is the worker's now to then. Each
adapter is ended with SIGKILL once measured: a SIGTERM's `--shutdown-delay` would only add 5 s a run. Absolute
figures move with the Python build and the libraries; the ratio is the figure to read. Plain script, no asserts:

    python bench/bench_memory.py [--runtimes 1000,5000] [--seconds 60] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtimes", default="1000,5000", help="fleet sizes, comma-separated (default 1000,5000)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long to sample each adapter once ready (default 60: four refreshes, two resyncs)")
    parser.add_argument("--workers", type=int, default=None,
                        help="serving workers (--workers added to both runs; default: the Deployment's args)")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from bench.bench_fleet import NAMESPACE, PODS_PER_RUNTIME, deployment, start  # noqa: E402
from bench.bench_fleet_ops import pod_ip, serve_exporters  # noqa: E402

POD_NAMESPACE = "modelmesh-autoscaler"
"""The adapter's namespace, `$(POD_NAMESPACE)` in the Deployment's args."""
MIB = 1024 * 1024


def shipped_args() -> list[str]:
    """The adapter container's args in manifests/base/deployment.yaml."""
    manifest = yaml.safe_load((REPO / "manifests" / "base" / "deployment.yaml").read_text())
    containers = manifest["spec"]["template"]["spec"]["containers"]
    return [str(arg) for arg in next(c for c in containers if c["name"] == "adapter")["args"]]


def policy_text() -> str:
    """The ConfigMap's `policy.yaml`, which the Deployment mounts and passes as --config."""
    config_map = yaml.safe_load((REPO / "manifests" / "base" / "config-map-policy.yaml").read_text())
    return str(config_map["data"]["policy.yaml"])


def adapter_args(mode: str, workdir: Path, port: int, exporter_port: int, runtimes: int,
                 workers: int | None = None) -> list[str]:
    """`serve`'s args for `mode` ("shipped" or "targets"), from the manifest's (`workers`: `--workers` added)."""
    args = []
    for arg in shipped_args():
        name = arg.split("=", 1)[0]
        if name == "--listen":
            arg = f"--listen=127.0.0.1:{port}"
        elif name == "--exporter-port":
            arg = f"--exporter-port={exporter_port}"
        elif name == "--config":
            arg = f"--config={workdir / 'policy.yaml'}"
        elif mode == "targets" and name in ("--leader-elect", "--leader-elect-namespace", "--bridge"):
            continue
        args.append(arg.replace("$(POD_NAMESPACE)", POD_NAMESPACE))
    args.append(f"--kubeconfig={workdir / 'kubeconfig'}")
    if workers is not None:
        args.append(f"--workers={workers}")
    if mode == "targets":
        args += [f"--targets={write_targets(workdir, runtimes, exporter_port)}", "--deletion-cost=off"]
    return args


def write_targets(workdir: Path, runtimes: int, exporter_port: int) -> Path:
    """The fleet's pods as a targets file, at the addresses the Kubernetes API gives them."""
    path = workdir / "targets.yaml"
    number = iter(range(10**7))
    entries = []
    for r in range(runtimes):
        pods = []
        for _ in range(PODS_PER_RUNTIME):
            name = f"{deployment(r)}-5d9c8b7f6-{next(number)}"
            pods.append({"name": name, "url": f"http://{pod_ip(next(number))}:{exporter_port}/metrics"})
        entries.append({"namespace": NAMESPACE, "deployment": deployment(r), "pods": pods})
    path.write_text(yaml.safe_dump({"runtimes": entries}))
    return path


def serve_kube(workdir: str, runtimes: int, ca_pem: str, ports: multiprocessing.Queue[int]) -> None:
    """The fake Kubernetes API with the fleet (pods numbered as `write_targets` numbers them)."""
    from tests.fakes.kube import FakeKubeApi

    async def run() -> None:
        async with FakeKubeApi() as kube:
            kube.set_authentication_config(requestheader_client_ca=ca_pem)
            number = iter(range(10**7))
            selector = {"modelmesh-service": "modelmesh-serving"}
            for r in range(runtimes):
                name = deployment(r)
                labels = {**selector, "name": name}
                kube.add_deployment(NAMESPACE, name, PODS_PER_RUNTIME, labels=labels, selector=labels)
                for _ in range(PODS_PER_RUNTIME):
                    kube.add_pod(NAMESPACE, f"{name}-5d9c8b7f6-{next(number)}", labels=labels,
                                 ip=pod_ip(next(number)))
                kube.add_hpa(NAMESPACE, f"{name}-hpa", max_replicas=10, min_replicas=1,
                             target=("RuntimeScale", f"rt{r}"), metric_selector={"deployment": name})
                kube.add_serving_runtime(NAMESPACE, f"rt{r}", replicas=PODS_PER_RUNTIME)
                kube.add_runtime_scale(NAMESPACE, f"rt{r}", replicas=PODS_PER_RUNTIME)
            kube.write_kubeconfig(Path(workdir) / "kubeconfig", namespace=POD_NAMESPACE)
            ports.put(kube.port)
            await asyncio.Event().wait()

    asyncio.run(run())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ready(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def process_tree(pid: int) -> list[int]:
    found = [pid]
    for parent in found:  # grows as children are found
        with contextlib.suppress(OSError):
            found += [int(child) for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
    return found


def memory(pid: int) -> tuple[int, int, str]:
    """(RSS, PSS) in bytes and what the process is, from /proc; zeros for a process gone."""
    values = {"Rss": 0, "Pss": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in values:
                values[key] = int(rest.split()[0]) * 1024
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0, 0, "gone"
    kind = ("resource tracker" if "resource_tracker" in command else
            "serving worker" if "multiprocessing.spawn" in command else "refresh process")
    return values["Rss"], values["Pss"], kind


def measure(mode: str, workdir: Path, runtimes: int, exporter_port: int, seconds: float,
            workers: int | None = None) -> dict[str, float]:
    """Run the adapter in `mode` until ready, sample its processes for `seconds`; the figures at the peak (of
    the serving workers, the largest)."""
    port = free_port()
    log = open(workdir / f"adapter-{mode}.log", "wb")  # noqa: SIM115
    started = time.monotonic()
    adapter = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", *adapter_args(mode, workdir, port, exporter_port, runtimes, workers)],
        stdout=log, stderr=subprocess.STDOUT, cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO), "POD_NAMESPACE": POD_NAMESPACE})
    try:
        while not ready(port):
            if adapter.poll() is not None or time.monotonic() - started > 120 + runtimes / 20:
                raise RuntimeError(f"{mode}: the adapter did not become ready; see {workdir}/adapter-{mode}.log")
            time.sleep(0.2)
        ready_s = time.monotonic() - started
        peak: dict[str, float] = {"pss": 0.0}
        end = time.monotonic() + seconds
        while True:
            rows = [memory(pid) for pid in process_tree(adapter.pid)]
            pss = sum(row[1] for row in rows)
            if pss > peak["pss"]:
                peak = {"pss": pss}
                for rss, _, kind in rows:
                    if kind != "resource tracker":
                        peak[kind] = max(peak.get(kind, 0.0), rss)
            if time.monotonic() >= end:
                break
            time.sleep(1.0)
        if adapter.poll() is not None:
            raise RuntimeError(f"{mode}: the adapter ended while measured; see {workdir}/adapter-{mode}.log")
        peak["ready_s"] = ready_s
        return peak
    finally:
        for pid in reversed(process_tree(adapter.pid)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        adapter.wait()
        log.close()


WORKER_IMPORTS = "import autoscaler.serving_worker, autoscaler.api.auth, autoscaler.kube.reviews"
"""What a serving worker imports to serve behind authentication (its entry point, the gate and the reviews)."""
LIBRARY_IMPORTS = "import kubernetes.aio.config, kubernetes.aio.client"
"""What every serving worker imported on top before 5 December 2026, to load its review connection."""
_MEASURE_ITSELF = """
import sys
from pathlib import Path
values = {}
for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
    key, _, rest = line.partition(":")
    if key in ("Rss", "Pss"):
        values[key] = int(rest.split()[0]) * 1024
print(values["Rss"], values["Pss"], sum(1 for name in sys.modules if name.split(".")[0] == "kubernetes"))
"""


def imports_memory(imports: str) -> tuple[int, int, int]:
    """(RSS, PSS, modules of the Kubernetes library loaded) of a fresh interpreter once it ran `imports`."""
    answer = subprocess.run([sys.executable, "-c", imports + "\n" + _MEASURE_ITSELF], capture_output=True,
                            text=True, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    rss, pss, modules = (int(value) for value in answer.stdout.split())
    return rss, pss, modules


def library_in_a_worker() -> None:
    """The second table: a worker's imports now, and with the library on top as before 5 December 2026."""
    now, then = imports_memory(WORKER_IMPORTS), imports_memory(WORKER_IMPORTS + "\n" + LIBRARY_IMPORTS)
    print("\n| serving worker's imports | RSS | PSS | Kubernetes library modules | RSS / with the library |")
    print("|---|---|---|---|---|")
    for name, (rss, pss, modules) in (("now (review connection from the refresh process)", now),
                                      ("with the library, as before 5 December 2026", then)):
        print(f"| {name} | {rss / MIB:.1f} MiB | {pss / MIB:.1f} MiB | {modules} | {rss / then[0]:.2f} |")
    print(f"\nthe library: {(then[0] - now[0]) / MIB:.1f} MiB of RSS in each worker that loads it", flush=True)


def main() -> None:
    args = parse_args()
    import trustme

    print("| runtimes (pods) | run | ready after | refresh process RSS | serving worker RSS (largest) | all processes "
          "PSS (peak) | PSS / targets run |")
    print("|---|---|---|---|---|---|---|")
    for runtimes in [int(n) for n in args.runtimes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as temporary:
            workdir = Path(temporary)
            (workdir / "policy.yaml").write_text(policy_text())
            exporter_port = free_port()
            exporters, _ = start(serve_exporters, exporter_port)
            kube, _ = start(serve_kube, str(workdir), runtimes, trustme.CA().cert_pem.bytes().decode())
            try:
                results = {mode: measure(mode, workdir, runtimes, exporter_port, args.seconds, args.workers)
                           for mode in ("targets", "shipped")}
            finally:
                kube.terminate()
                exporters.terminate()
            for mode, figures in results.items():
                ratio = figures["pss"] / results["targets"]["pss"]
                print(f"| {runtimes:,} ({runtimes * PODS_PER_RUNTIME:,}) | {mode} | {figures['ready_s']:.1f} s "
                      f"| {figures.get('refresh process', 0) / MIB:.0f} MiB "
                      f"| {figures.get('serving worker', 0) / MIB:.0f} MiB | {figures['pss'] / MIB:.0f} MiB "
                      f"| {ratio:.2f} |", flush=True)
    library_in_a_worker()


if __name__ == "__main__":
    main()
