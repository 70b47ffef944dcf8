"""Where a request's CPU goes in the serving process beyond its instructions: user and kernel time, system calls,
context switches and threads, per request, for the adapter's serving worker against the bare aiohttp TLS handler.

`bench_request_cost.py` counts user-space instructions, which the machine's load does not move; `bench_fleet.py`
reads CPU time from /proc, which includes the kernel's share and what cache misses and mispredictions cost.
When the two ratios differ, this says where: each server (the adapter with one worker, auth on, its refresh
running; the bare handler returning the same bytes, as in `bench_fleet.py`) gets the same ApacheBench runs in
turn, a fixed number of keep-alive requests each, and before and after each run the bench reads for every
thread of the serving process its CPU time from `schedstat` (nanoseconds, not clock ticks), user and system
time from `stat`, and voluntary and involuntary context switches. CPU time a request still moves with what
runs on the other cores (a hyperthread sibling slows every instruction): compare servers within one run,
round by round. `--compare-tree DIR` (repeatable) adds the adapter of another checkout to the same rounds, so
that a change is measured against its parent under the same load. `--idle-seconds S` first reads each server's
CPU over S seconds without requests (timers, snapshot swaps, review refreshes: what a request-count figure
would spread over its requests). With `--strace`, one more run per server under `strace -c -f` names every
system call and its count a request (strace slows the server: its times mean nothing, its counts are exact).

    python bench/bench_serving_kernel.py [--runtimes 1000] [--requests 20000] [--rounds 3] [--strace]
        [--idle-seconds 30] [--compare-tree DIR ...]

Prints one row per server per round and the medians. Plain script, no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def build_parser() -> argparse.ArgumentParser:
    """The flags, read before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runtimes", type=int, default=1000, help="fleet size")
    parser.add_argument("--requests", type=int, default=20000, help="requests per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per server")
    parser.add_argument("--concurrency", type=int, default=10, help="keep-alive connections (wrk's default)")
    parser.add_argument("--refresh-interval", type=float, default=None,
                        help="the adapter's refresh interval (default as bench_fleet.py picks it)")
    parser.add_argument("--strace", action="store_true", help="also count system calls by name under strace")
    parser.add_argument("--serving-cpu", type=int, default=0 if len(os.sched_getaffinity(0)) >= 2 else -1,
                        help="pin the serving processes to this CPU and everything else off it (-1: no pinning)")
    parser.add_argument("--compare-tree", type=Path, action="append", default=[],
                        help="also run the adapter of this source tree (another commit's checkout), in the same "
                        "rounds: a change's effect, under the same load (repeatable)")
    parser.add_argument("--idle-seconds", type=float, default=0.0,
                        help="first measure each server's CPU over this many seconds without requests: what its "
                        "timers, snapshot swaps and review refreshes cost whatever the load")
    parser.add_argument("--adapter-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the adapters only (to compare a setting)")
    return parser


if __name__ == "__main__":
    build_parser().parse_args()


from bench import stop_on_term  # noqa: E402
from bench.bench_fleet import (  # noqa: E402
    HEADERS,
    METRICS,
    PODS_PER_RUNTIME,
    RefreshPlan,
    metric_path,
    pin,
    serve_bare,
    serve_fleet,
    serve_kube,
    start,
    wait_known,
    wait_served,
    write_pki,
    write_targets,
)
from bench.client_priority import prioritized_command  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.processes import serving_workers  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Counts:
    """What a serving process has used so far, summed over its threads."""

    cpu_ns: int = 0
    """On-CPU time from `schedstat`, in nanoseconds (the scheduler's own clock)."""
    user_s: float = 0.0
    system_s: float = 0.0
    voluntary: int = 0
    """Context switches where the thread waited (for the event loop: each time it sleeps in epoll_wait)."""
    involuntary: int = 0
    """Context switches where the thread was preempted."""
    threads: int = 0

    @classmethod
    def of(cls, pid: int) -> Counts:
        counts = cls()
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                counts.cpu_ns += int((task / "schedstat").read_text().split()[0])
                stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
                counts.user_s += int(stat[11]) * TICK_S
                counts.system_s += int(stat[12]) * TICK_S
                status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                              if ":\t" in line)
                counts.voluntary += int(status["voluntary_ctxt_switches"])
                counts.involuntary += int(status["nonvoluntary_ctxt_switches"])
                counts.threads += 1
        return counts

    def minus(self, before: Counts) -> Counts:
        return Counts(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)
                         if f.name != "threads"}, threads=self.threads)


@dataclass
class Row:
    server: str
    requests: int
    used: Counts

    def per_request(self) -> dict[str, float]:
        n = self.requests
        return {"cpu_us": self.used.cpu_ns / n / 1e3, "user_us": self.used.user_s / n * 1e6,
                "system_us": self.used.system_s / n * 1e6, "voluntary": self.used.voluntary / n,
                "involuntary": self.used.involuntary / n}


def ab(url: str, client_pem: Path, requests: int, concurrency: int) -> int:
    """`requests` keep-alive GETs over `concurrency` connections (ab, as `bench_fleet.py` runs it); the number
    completed. Raises if ab failed or answers were not 2xx (their cost is not a served value's)."""
    command = prioritized_command([
        "ab", "-k", "-q", "-l", "-c", str(concurrency), "-n", str(requests), "-E", str(client_pem),
        *(arg for name, value in HEADERS.items() for arg in ("-H", f"{name}: {value}")), url])
    result = subprocess.run(command, capture_output=True, timeout=600)
    text = result.stdout.decode(errors="replace")
    complete = re.search(r"^Complete requests:\s+(\d+)", text, re.M)
    if result.returncode != 0 or complete is None:
        raise RuntimeError(f"ab failed: {result.stderr.decode(errors='replace')[-500:] or text[-500:]}")
    if re.search(r"^Non-2xx responses:\s+[1-9]", text, re.M):
        raise RuntimeError(f"answers not 2xx from {url}:\n{text[-800:]}")
    return int(complete.group(1))


def measured(pid: int, url: str, client_pem: Path, requests: int, concurrency: int) -> tuple[int, Counts]:
    before = Counts.of(pid)
    done = ab(url, client_pem, requests, concurrency)
    return done, Counts.of(pid).minus(before)


_STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", re.M)


def straced(pid: int, url: str, client_pem: Path, requests: int, concurrency: int) -> dict[str, float]:
    """System calls a request by name, every thread of `pid`, from `strace -c -f` attached for one ab run."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", out.name],
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)  # strace attaches to each thread
            done = ab(url, client_pem, requests, concurrency)
        finally:
            tracer.terminate()
            tracer.wait(30)
        text = Path(out.name).read_text()
    return {name: int(calls) / done for calls, name in _STRACE_ROW.findall(text) if name != "total"}


def start_adapter(tree: Path, workdir: Path, targets: Path, plan: RefreshPlan, name: str,
                  extra: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """The adapter of the source tree `tree` (one serving worker, auth on, its refresh running); its base URL."""
    port = free_port()
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115
    adapter = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--tls-cert-file", str(workdir / "server.pem"), "--tls-private-key-file", str(workdir / "server.pem"),
         "--requestheader-client-ca-file", str(workdir / "front-proxy-ca.pem"),
         "--requestheader-allowed-names", "front-proxy-client", "--kubeconfig", str(workdir / "kubeconfig"),
         "--targets", str(targets), *plan.flags(), "--workers", "1", "--deletion-cost", "off",
         "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree), **extra})
    log.close()
    return adapter, f"https://127.0.0.1:{port}"


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if shutil.which("ab") is None:
        parser.error("needs ab (Debian: apt-get install apache2-utils)")
    if args.strace and shutil.which("strace") is None:
        parser.error("--strace needs strace (Debian: apt-get install strace)")
    if args.serving_cpu >= 0:
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {args.serving_cpu})
    pods = args.runtimes * PODS_PER_RUNTIME
    plan = RefreshPlan.for_fleet(pods, args.refresh_interval, None, 64)
    extra = dict(item.split("=", 1) for item in args.adapter_env)
    trees = {"adapter": REPO, **{f"compared {n}" if len(args.compare_tree) > 1 else "compared": tree.resolve()
                                 for n, tree in enumerate(args.compare_tree, 1)}}
    with tempfile.TemporaryDirectory(prefix="bench-serving-kernel-") as directory:
        workdir = Path(directory)
        client = write_pki(workdir)
        fleet, fleet_port = start(serve_fleet, pods)
        kube, _ = start(serve_kube, workdir)
        targets = write_targets(workdir / "targets.yaml", args.runtimes, fleet_port)
        adapters = {name: start_adapter(tree, workdir, targets, plan, name, extra) for name, tree in trees.items()}
        bare = None
        rows: list[Row] = []
        traced: dict[str, dict[str, float]] = {}
        try:
            path = metric_path(args.runtimes - 1, METRICS[0])
            servers: dict[str, tuple[int, str]] = {}
            for name, (adapter, base) in adapters.items():
                body = asyncio.run(wait_served(base + path, client, 120 + args.runtimes / 20))
                asyncio.run(wait_known(base, client, 60 + 3 * plan.interval_s))
                workers = serving_workers(adapter.pid)
                if len(workers) != 1:
                    raise RuntimeError(f"expected one serving worker of {name}, found {workers}")
                servers[name] = (workers[0], base + path)
            bare, bare_port = start(serve_bare, workdir, body)
            servers["bare"] = (bare.pid or 0, f"https://127.0.0.1:{bare_port}{path}")
            pem = workdir / "front-proxy-client.pem"
            if args.serving_cpu >= 0:
                for pid, _ in servers.values():
                    pin(pid, {args.serving_cpu})
            for _, url in servers.values():  # warm-up
                ab(url, pem, min(args.requests, 2000), args.concurrency)
            if args.idle_seconds:
                idle_before = {name: Counts.of(pid) for name, (pid, _) in servers.items()}
                time.sleep(args.idle_seconds)
                print("CPU while no request comes (timers, the refresh's snapshots, review refreshes): " + ", ".join(
                    f"{name} {Counts.of(pid).minus(idle_before[name]).cpu_ns / 1e6 / args.idle_seconds:.2f} ms a second"
                    for name, (pid, _) in servers.items()))
            print(f"{args.runtimes:,} runtimes, {plan.words()}; {args.requests:,} requests a run over "
                  f"{args.concurrency} keep-alive connections (ab, one URL); "
                  + "".join(f"{name}: the adapter of {tree}; " for name, tree in trees.items() if name != "adapter")
                  + f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print("| server | CPU µs a request (schedstat) | user / system µs | voluntary / involuntary switches "
                  "a request | threads |")
            print("|---|---|---|---|---|")
            for _ in range(args.rounds):
                for name, (pid, url) in servers.items():
                    done, used = measured(pid, url, pem, args.requests, args.concurrency)
                    row = Row(name, done, used)
                    rows.append(row)
                    r = row.per_request()
                    print(f"| {name} | {r['cpu_us']:.1f} | {r['user_us']:.1f} / {r['system_us']:.1f} "
                          f"| {r['voluntary']:.3f} / {r['involuntary']:.3f} | {used.threads} |", flush=True)
            if args.strace:
                for name, (pid, url) in servers.items():
                    traced[name] = straced(pid, url, pem, min(args.requests, 5000), args.concurrency)
        finally:
            for adapter, _ in adapters.values():
                adapter.terminate()
            for adapter, _ in adapters.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    adapter.wait(20)
            for process in (fleet, kube, bare):
                if process is not None:
                    process.terminate()
                    process.join(5)
    report(rows, traced)


def report(rows: list[Row], traced: dict[str, dict[str, float]]) -> None:
    """Each server's medians, each one's ratio to the bare handler by CPU time (and, for a compared tree, the
    two adapters' ratio), and the system calls by name."""
    names = list(dict.fromkeys(row.server for row in rows))
    medians = {name: {key: statistics.median(row.per_request()[key] for row in rows if row.server == name)
                      for key in rows[0].per_request()} for name in names}
    bare = medians["bare"]
    for name in names:
        m = medians[name]
        ratio = f"; per-core ratio bare / {name} {bare['cpu_us'] / m['cpu_us']:.2f}" if name != "bare" else ""
        print(f"median {name}: CPU a request {m['cpu_us']:.1f} µs (user {m['user_us']:.1f}, system "
              f"{m['system_us']:.1f}){ratio}")
    for compared in (name for name in names if name.startswith("compared")):
        ours, theirs = ([r for r in rows if r.server == name] for name in ("adapter", compared))
        pairs = [(a.used.cpu_ns / a.requests) / (c.used.cpu_ns / c.requests) for a, c in zip(ours, theirs, strict=True)]
        print(f"adapter / {compared} CPU a request, round by round: " + ", ".join(f"{p:.3f}" for p in pairs)
              + f" (median {statistics.median(pairs):.3f}; adapter cheaper in {sum(p < 1 for p in pairs)} of "
              f"{len(pairs)})")
    if traced:
        calls = sorted({call for counts in traced.values() for call in counts},
                       key=lambda call: -max(counts.get(call, 0) for counts in traced.values()))
        print("| system call | " + " | ".join(f"{name} a request" for name in traced) + " |")
        print("|---" * (len(traced) + 1) + "|")
        for call in calls:
            print(f"| {call} | " + " | ".join(f"{traced[name].get(call, 0):.3f}" for name in traced) + " |")
        print("| all | " + " | ".join(f"{sum(counts.values()):.3f}" for counts in traced.values()) + " |")


if __name__ == "__main__":
    stop_on_term.run(main)
