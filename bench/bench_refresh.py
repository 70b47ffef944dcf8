"""How much CPU one refresh's decisions cost at the scale DESIGN §8 names: 10,000 pods in 100 runtimes.

Builds the snapshots in memory (no I/O: the sources' cost is theirs), then runs `decide` for every runtime
as the refresh loop does, carrying the smoothing memory from one refresh to the next. Prints the median CPU
time per full refresh and the peak memory one refresh allocates. The machine's speed and load move the
absolute figure; the ratio to a plain loop that only reads every pod's fields (run interleaved, in the same
process) is the figure to compare across machines. Plain script, no asserts:

    python bench/bench_refresh.py [--runtimes 100] [--pods 100] [--runs 7]
    python bench/bench_refresh.py --runtimes 1000 --pods 10
    python bench/bench_refresh.py --runtimes 5000 --pods 2 --render   # also every answer, rendered to bytes
    python bench/bench_refresh.py --gc-tuned   # with the refresh process's GC settings (autoscaler/gcsettings.py)
    python bench/bench_refresh.py --models-per-pod 50   # every pod also reports 50 recent models (unique copies)

On a shared, noisy machine compare two versions by instructions, which are exact and repeatable: run
`--refreshes-only N` (warm-up, then N refreshes, nothing timed or printed) under valgrind with N=1 and N=3;
half the difference is one refresh's instructions (95.5 M at 10,000 pods in 100 runtimes, 7 December 2026;
92 M on 2 December; docs/performance.md, The crash-loop hold's lookups):

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/bench_refresh.py --gc-tuned --refreshes-only 3

With `--models-per-pod 50` (every pod reporting 50 recent models: the unique-copy need term counts them, and
those runtimes took the decision's general path) a refresh was 673 M instructions; 511 M once the counting
kept each pod's in-window ids by a comprehension and `podviews.examine_pods` scored the term in its own pass
(2 December 2026; docs/performance.md, The cost of per-model data).

`--records-only N` counts the /debug records that the rendering writes for every runtime after the decisions
the same way (42 M a pass at 10,000 pods in 100 runtimes).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import tracemalloc
from dataclasses import replace

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory

REFRESH_S = 15.0


def build_snapshots(runtimes: int, pods: int, now: float, seed: int = 7,
                    models_per_pod: int = 0) -> list[RuntimeSnapshot]:
    """Skewed, realistic-looking pods: a few hot, many idle, some stale, a few not Ready.

    `models_per_pod` > 0: each pod also reports that many recent models (`recent_models`), drawn from a
    runtime's pool of `pods x models_per_pod / 3` ids (a model on about three pods, some on one), last served
    0-20 minutes ago (a third outside the default 600 s window); drawn after the pod's other signals, so
    that 0 leaves the pods exactly as before."""
    rng = random.Random(seed)
    snapshots = []
    pool = [f"model-{m:06d}" for m in range(max(1, pods * models_per_pod // 3))]
    for r in range(runtimes):
        samples: list[PodSample] = []
        for i in range(pods):
            hot = rng.random() < 0.2
            samples.append(
                PodSample(
                    name=f"modelmesh-serving-rt{r}-{i:05d}",
                    ready=rng.random() > 0.02,
                    sampled_at=now - rng.uniform(0.0, 60.0 if rng.random() < 0.03 else 20.0),
                    gpu_busy=rng.uniform(0.6, 1.0) if hot else rng.uniform(0.0, 0.3),
                    requests_per_second=rng.uniform(50.0, 200.0) if hot else rng.uniform(0.0, 20.0),
                    queue_delay_s=rng.uniform(0.0, 0.2) if hot else 0.0,
                    cache_misses_per_second=rng.uniform(0.0, 2.0),
                    lru_age_s=rng.uniform(60.0, 3600.0),
                    cache_used_ratio=rng.uniform(0.7, 1.0),
                    models_loaded=float(rng.randint(1, 40)),
                )
            )
            if models_per_pod:
                served = {m: now - rng.uniform(0.0, 1200.0) for m in rng.sample(pool, min(models_per_pod, len(pool)))}
                samples[-1] = replace(samples[-1], recent_models=served)
        snapshots.append(
            RuntimeSnapshot(
                key=RuntimeKey("bench", f"modelmesh-serving-rt{r}"),
                pods=tuple(samples),
                taken_at=now,
                replicas=pods,
            )
        )
    return snapshots


def refresh(
    snapshots: list[RuntimeSnapshot],
    policy: RuntimePolicy,
    memory: dict[RuntimeKey, RuntimeMemory],
    now: float,
) -> dict[RuntimeKey, RuntimeView]:
    """What the refresh loop does per refresh, minus the I/O: decide every runtime, keep views and memory."""
    views = {}
    for snapshot in snapshots:
        views[snapshot.key], memory[snapshot.key] = decide(snapshot, policy, memory.get(snapshot.key), now, 30.0)
    return views


def plain_loop(snapshots: list[RuntimeSnapshot]) -> float:
    """The floor of any per-pod decision in Python: read each pod's name, readiness and signals once."""
    total = 0.0
    for snapshot in snapshots:
        for pod in snapshot.pods:
            _ = pod.name, pod.ready, pod.sampled_at, pod.gpu_sampled_at, pod.cache_misses_per_second
            for x in (pod.gpu_busy, pod.requests_per_second, pod.queue_delay_s, pod.lru_age_s,
                      pod.cache_used_ratio, pod.models_loaded):
                if x is not None:
                    total += x
    return total


def render(views: dict[RuntimeKey, RuntimeView], runs: int) -> None:
    """What the refresh process does next: every answer of every runtime as bytes, packed for the workers (the
    /debug documents as the compact records a worker writes JSON from when asked)."""
    from autoscaler.api.debug_document import debug_json, debug_record
    from autoscaler.api.packed import pack
    from autoscaler.api.render import render_snapshot

    whole, debug, asked = [], [], []
    for _ in range(runs):
        started = time.process_time()
        blob = pack(render_snapshot(views, True))
        whole.append(time.process_time() - started)
        started = time.process_time()
        records = [debug_record(view) for view in views.values()]
        debug.append(time.process_time() - started)
        started = time.process_time()
        for record in records:
            debug_json(record)
        asked.append((time.process_time() - started) / len(records))
    known = sum(view.known for view in views.values())
    print(f"render every answer ({known} of {len(views)} runtimes known) and pack the snapshot: "
          f"median {statistics.median(whole) * 1e3:.1f} ms ({len(blob) / 2**20:.1f} MiB), "
          f"of which /debug records {statistics.median(debug) * 1e3:.1f} ms; "
          f"writing one runtime's /debug JSON when asked: {statistics.median(asked) * 1e6:.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtimes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=100, help="pods per runtime")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--models-per-pod", type=int, default=0,
                        help="recent models each pod reports (per-model use, for the unique-copy need term); "
                             "0: none, as an exporter without per-model metrics")
    parser.add_argument("--render", action="store_true",
                        help="also time rendering the views into the serving snapshot, as the refresh does")
    parser.add_argument("--gc-tuned", action="store_true",
                        help="apply the refresh process's GC settings after the warm-up, as the adapter does "
                             "after start-up (autoscaler.gcsettings.tune_for_refresh)")
    parser.add_argument("--refreshes-only", type=int, metavar="N",
                        help="only run N refreshes after the warm-up, with every snapshot built first (three "
                             "at most), and print nothing: for counting instructions under valgrind")
    parser.add_argument("--records-only", type=int, metavar="N",
                        help="only write every runtime's /debug record N times after the warm-up refresh (three "
                             "at most), and print nothing: for counting the records' instructions under valgrind")
    args = parser.parse_args()

    now = 1_700_000_000.0
    tracemalloc.start()
    snapshots = build_snapshots(args.runtimes, args.pods, now, models_per_pod=args.models_per_pod)
    snapshot_bytes, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    policy = RuntimePolicy(target_rps_per_pod=120.0)
    memory: dict[RuntimeKey, RuntimeMemory] = {}
    views = refresh(snapshots, policy, memory, now)  # warm-up: first memory, imports, caches
    if args.gc_tuned:
        from autoscaler.gcsettings import tune_for_refresh

        tune_for_refresh()
    if args.records_only is not None:
        from autoscaler.api.debug_document import debug_record

        for _ in range(min(args.records_only, 3)):
            for view in views.values():
                debug_record(view)
        return
    if args.refreshes_only is not None:
        later = [build_snapshots(args.runtimes, args.pods, now + REFRESH_S * (run + 1),
                                 models_per_pod=args.models_per_pod) for run in range(3)]
        for run in range(min(args.refreshes_only, 3)):
            refresh(later[run], policy, memory, now + REFRESH_S * (run + 1))
        return

    cpu = []
    plain = []
    for run in range(args.runs):
        t = now + REFRESH_S * (run + 1)
        # The same pods, sampled again before this refresh (as a source would): with the first refresh's
        # stamps, every pod would be stale from the fourth run on, and the figure that of an all-503 fleet.
        snapshots = build_snapshots(args.runtimes, args.pods, t, models_per_pod=args.models_per_pod)
        started = time.process_time()
        plain_loop(snapshots)
        plain.append(time.process_time() - started)
        started = time.process_time()
        views = refresh(snapshots, policy, memory, t)
        cpu.append(time.process_time() - started)

    if args.render:
        render(views, args.runs)

    # Like the refresher, the previous refresh's views stay alive until the new ones replace them.
    t = now + REFRESH_S * (args.runs + 1)
    snapshots = build_snapshots(args.runtimes, args.pods, t, models_per_pod=args.models_per_pod)
    tracemalloc.start()
    views = refresh(snapshots, policy, memory, t)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del views

    total = args.runtimes * args.pods
    median = statistics.median(cpu)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    gc_mode = "refresh process's (gcsettings)" if args.gc_tuned else "Python's defaults"
    print(f"pods: {total} in {args.runtimes} runtimes; runs: {args.runs}; GC settings: {gc_mode}; "
          f"load average {load}")
    print(
        f"cpu per full refresh: median {median * 1e3:.1f} ms, min {min(cpu) * 1e3:.1f} ms, "
        f"max {max(cpu) * 1e3:.1f} ms ({median / total * 1e6:.2f} µs per pod)"
    )
    print(f"plain loop over the same pods: median {statistics.median(plain) * 1e3:.2f} ms; "
          f"refresh / plain loop: {median / statistics.median(plain):.1f}x")
    print(f"snapshots in memory: {snapshot_bytes / 2**20:.1f} MiB")
    print(
        f"one refresh (tracemalloc): peak {peak / 2**20:.1f} MiB allocated, "
        f"{held / 2**20:.1f} MiB still held by its views and memory"
    )


if __name__ == "__main__":
    main()
