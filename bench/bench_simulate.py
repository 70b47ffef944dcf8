"""How long `modelmesh-autoscaler simulate` takes: a day of trace for 500 models (the issue's budget: under
a minute on one core), per policy (the four the command runs by default), plus reading the trace from CSV as a
user's is read, and drawing the plot. Plain script, no asserts:

    python bench/bench_simulate.py [--models 500] [--hours 24]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.cli import sizing
from autoscaler.simulation.cluster import ClusterShape
from autoscaler.simulation.engine import oracle, simulate
from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SimPolicy, SkewAwarePolicy, max_bound
from autoscaler.simulation.report import plot_timeline
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.trace import buckets, read_csv, synthetic, write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--hours", type=float, default=24.0)
    args = parser.parse_args()
    trace = synthetic(models=args.models, hours=args.hours)
    with tempfile.TemporaryDirectory() as directory:  # a user's trace comes as a file: read as `--trace` does
        path = Path(directory) / "trace.csv"
        write_csv(trace, path)
        started = time.perf_counter()
        trace = read_csv(path)
    bucket_s, arrivals = buckets(trace, 5.0)
    shape = ClusterShape()
    best = oracle(trace, shape, 600.0, bucket_s)
    fixed, maximum, start = sizing(best.peak_rps, sum(arrivals[0].rates), shape.pod_rps, 2, None,
                                   peak_pods=best.peak_pods)
    prepared = time.perf_counter() - started
    print(f"trace: {args.models} models, {args.hours:g} h, {len(trace.slot)} rows, "
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
        plot_timeline(Path(directory) / "timeline.png", [trace.interval_s * i for i in range(len(rates))],
                      rates.tolist(), results)
    print(f"plot        {time.perf_counter() - t0:6.2f} s")
    print(f"total       {time.perf_counter() - started:6.2f} s")


if __name__ == "__main__":
    main()
