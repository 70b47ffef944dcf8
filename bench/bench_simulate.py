"""How long `modelmesh-autoscaler simulate` takes: a day of trace for 500 models (the issue's budget: under
a minute on one core), per policy (the four the command runs by default), plus reading the trace from CSV as a
user's is read, and drawing the plot. Plain script, no asserts:

    python bench/bench_simulate.py [--models 500] [--hours 24] [--functions] [--pod-rps 20] [--cache-models 100]
    python bench/bench_simulate.py --trace FILE.csv[.gz]

`--functions` draws the shape of Azure Functions' public trace converted to rows (invocations per minute of
thousands of functions): per-model rates log-normal over five orders of magnitude, most models a request an
hour or less, a row only where a model has requests. The synthetic shapes give every model traffic in most
minutes; this one is where reading and the cache's pods, not the requests, take the time. `--trace` times a
file of your own. The largest resident size is printed at the end. `--digest` also prints a hash of every
policy's result less its wall-clock seconds: a change meant to make the simulator faster, not different, prints
the same one before and after (bench/simulate_report_hashes.py does the same for the synthetic shapes).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.cluster import ClusterShape
from autoscaler.simulation.cluster_flag_values import cache_models, pod_rps
from autoscaler.simulation.engine import PolicyResult, oracle, simulate
from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SimPolicy, SkewAwarePolicy, max_bound
from autoscaler.simulation.run_size import sizing
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.timeline_plot import plot_timeline
from autoscaler.simulation.trace import Trace, read_csv
from autoscaler.simulation.trace_buckets import buckets
from autoscaler.simulation.trace_write import write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--functions", action="store_true", help="Azure Functions' shape (see above)")
    parser.add_argument("--trace", type=Path, help="time this trace file instead of a drawn one")
    parser.add_argument("--pod-rps", type=pod_rps, default=20.0)
    parser.add_argument("--cache-models", type=cache_models, default=100)
    parser.add_argument("--digest", action="store_true", help="print a hash of the results (see above)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:  # a user's trace comes as a file: read as `--trace` does
        path = args.trace or Path(directory) / "trace.csv"
        if args.trace is None:
            write_csv(functions(args.models, args.hours) if args.functions else
                      synthetic(models=args.models, hours=args.hours), path)
        started = time.perf_counter()
        trace = read_csv(path)
    bucket_s, arrivals = buckets(trace, 5.0)
    shape = ClusterShape(pod_rps=args.pod_rps, cache_models=args.cache_models)
    best = oracle(trace, shape, 600.0, bucket_s)
    fixed, maximum, start = sizing(best.peak_rps, sum(arrivals[0].rates), shape.pod_rps, 2, None,
                                   peak_pods=best.peak_pods)
    prepared = time.perf_counter() - started
    print(f"trace: {len(trace.models)} models, {trace.duration_s / 3600:g} h, {len(trace.slot)} rows, "
          f"{trace.total_requests:.0f} requests; read from CSV and bucketed in {prepared:.2f} s")
    policies: list[tuple[SimPolicy, int]] = [
        (FixedPolicy(fixed), fixed), (max_bound(maximum), maximum), (MeanHpaPolicy(2, maximum), start),
        (SkewAwarePolicy(RuntimePolicy(min_replicas=2, max_replicas=maximum), 2, maximum, SHIPPED_BEHAVIOR), start),
    ]
    results = []
    for policy, initial in policies:
        t0, cpu0 = time.perf_counter(), time.process_time()
        results.append(simulate(arrivals, bucket_s, 5.0, shape, policy, initial))
        # CPU seconds beside wall seconds: on a shared machine the wall clock also counts the neighbours
        print(f"{policy.name:<11} {time.perf_counter() - t0:6.2f} s ({time.process_time() - cpu0:.2f} s CPU)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        rates = trace.rate_per_interval()
        plot_timeline(Path(directory) / "timeline.png", trace.interval_s, rates.tolist(), results)
    print(f"plot        {time.perf_counter() - t0:6.2f} s")
    print(f"total       {time.perf_counter() - started:6.2f} s")
    print(f"max RSS     {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:6.0f} MB")
    if args.digest:
        print(f"digest      {digest(results)}")


def digest(results: list[PolicyResult]) -> str:
    """A hash of the results, their wall-clock seconds (the only field two identical runs differ in) left out."""
    fields = [repr(dataclasses.replace(result, wall_s=0.0)) for result in results]
    return hashlib.sha256("\n".join(fields).encode()).hexdigest()[:16]


def functions(models: int, hours: float, seed: int = 1) -> Trace:
    """Azure Functions' shape at 60 s: per-model invocations a minute log-normal (median 0.08, a few past
    1,000, capped at 5,000), a daily cycle of +-50%, Poisson counts, rows only where there are requests."""
    rng = np.random.default_rng(seed)
    steps = round(hours * 60)
    per_minute = np.minimum(rng.lognormal(-2.5, 2.5, models), 5000.0)
    cycle = 1.0 + 0.5 * np.sin(2 * np.pi * np.arange(steps) / 1440.0)
    slots, names, counts = [], [], []
    for step in range(steps):  # a step at a time: a day of 20,000 models as one grid is 230 MB of counts
        drawn = rng.poisson(per_minute * cycle[step])
        busy = np.flatnonzero(drawn)
        slots.append(np.full(len(busy), step))
        names.append(busy)
        counts.append(drawn[busy])
    return Trace(tuple(f"fn-{i:05d}" for i in range(models)), 0.0, 60.0, steps, np.concatenate(slots),
                 np.concatenate(names), np.concatenate(counts).astype(np.float64))


if __name__ == "__main__":
    main()
