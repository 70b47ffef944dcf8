"""What the cache term's pods buy: pod-hours against delays and cold loads, with many models per cache slot.

For one synthetic day (by default 5,000 models of the mixed shape on pods of 100 copies: far more models than
the cache slots the load needs) it replays fixed, mean-hpa and skew-aware variants and prints, per policy,
pod-hours (and as multiples of the oracle's and the cache oracle's), delayed requests (of them those that
waited for a cold load, and those that failed: every pod full of recently used copies refused the load, as
ModelMesh's churn limit does), cold loads, which term of the recommendation decided how often, and the reloads
by how long the model had gone unused when an eviction took its last copy: short gaps are thrashing (caches
too small for the models in use, which pods cure), long ones a model nobody asked for in between (more pods
would have held it idle for hours to spare one load). Plain script, no asserts:

    python bench/simulate_cache.py [--models 5000] [--hours 24] [--shape mixed] [--seed 0] [--no-fixed] \\
        [--max-replicas N] [--min-churn-age 300] [--variant 'name:target_lru_age_s=300'] ...

`--max-replicas` (default twice the peak's need, its models included, as `simulate`) shows what the cache term
asks for when the HPA's bound does not cut it; `--min-churn-age 0` replays as the simulator did before it
modelled ModelMesh's churn limit (a full pod evicting a copy used seconds ago rather than refusing the load).

Variants are those of bench/simulate_shapes.py (RuntimePolicy fields, HPA scale-down behavior).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run as `python bench/simulate_cache.py`: its sibling is bench.simulate_shapes

from autoscaler.simulation.cluster import ClusterShape  # noqa: E402
from autoscaler.simulation.cluster_flag_values import min_churn_age  # noqa: E402
from autoscaler.simulation.engine import PolicyResult, oracle, simulate  # noqa: E402
from autoscaler.simulation.figures import ratio_text  # noqa: E402
from autoscaler.simulation.goal import judge  # noqa: E402
from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SimPolicy, SkewAwarePolicy  # noqa: E402
from autoscaler.simulation.run_size import sizing  # noqa: E402
from autoscaler.simulation.synthetic_trace import synthetic  # noqa: E402
from autoscaler.simulation.trace_buckets import buckets  # noqa: E402
from bench.simulate_shapes import MIN_REPLICAS, parse_variant  # noqa: E402

GAP_EDGES = (60.0, 600.0, 3600.0)  # seconds: under a minute, within target_lru_age_s, within the hour, beyond


def gap_cells(gaps: list[float]) -> str:
    """The reloads per gap band, e.g. `12 / 340 / 2,100 / 800`."""
    counts = [0] * (len(GAP_EDGES) + 1)
    for gap in gaps:
        counts[sum(1 for edge in GAP_EDGES if gap > edge)] += 1
    return " / ".join(f"{c:,}" for c in counts)


def build_parser() -> argparse.ArgumentParser:
    """The script's flags; `--min-churn-age` read by `simulate`'s own converter (0 to a day, units taken)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=5000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--rps", type=float, default=150.0)
    parser.add_argument("--shape", default="mixed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-fixed", action="store_true")
    parser.add_argument("--max-replicas", type=int, default=None)
    parser.add_argument("--min-churn-age", type=min_churn_age, default=ClusterShape().min_churn_age_s)
    parser.add_argument("--no-mean-hpa", action="store_true", help="leave the baseline out (ratios then read n/a)")
    parser.add_argument("--variant", action="append", default=[], help="name:key=value,... (repeatable)")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    variants = [parse_variant(v) for v in args.variant] or [parse_variant("skew-aware:")]
    trace = synthetic(models=args.models, hours=args.hours, mean_rps=args.rps, shape=args.shape, seed=args.seed)
    shape = ClusterShape(min_churn_age_s=args.min_churn_age)
    bucket_s, arrivals = buckets(trace, 5.0)
    lru_age = variants[0].policy.target_lru_age_s
    best = oracle(trace, shape, lru_age, bucket_s)
    fixed, maximum, start = sizing(best.peak_rps, sum(arrivals[0].rates), shape.pod_rps, MIN_REPLICAS,
                                   args.max_replicas, peak_pods=best.peak_pods)
    print(f"{args.shape}, seed {args.seed}: {args.models} models, {args.hours:g} h, {trace.total_requests:,.0f} "
          f"requests; oracle {best.pod_hours:.1f} pod-hours, cache oracle ({lru_age:g} s) {best.cache_pod_hours:.1f}; "
          f"first loads {best.first_loads}; fixed {fixed}, maxReplicas {maximum}; "
          f"min churn age {args.min_churn_age:g} s")
    runs: list[tuple[SimPolicy, int]] = []
    if not args.no_mean_hpa:
        runs.append((MeanHpaPolicy(MIN_REPLICAS, maximum), start))
    if not args.no_fixed:
        runs.append((FixedPolicy(fixed), fixed))
    for variant in variants:
        settings = replace(variant.policy, min_replicas=max(MIN_REPLICAS, variant.policy.min_replicas or 0),
                           max_replicas=maximum)
        runs.append((SkewAwarePolicy(settings, MIN_REPLICAS, maximum, variant.behavior,
                                     deletion_costs=variant.deletion_costs, name=variant.name), start))
    print("| policy | pod-hours | x oracle | x cache oracle | delayed ratio (waiting for loads, failed) | cold loads | "
          "reloads by gap: <=1 min / 1-10 min / 10-60 min / >1 h | evicted, never asked again | "
          "vs mean-hpa: pod-hours / delayed / avoidable cold | terms | s |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---|---|---:|")
    base: PolicyResult | None = None
    for policy, initial in runs:
        started = time.perf_counter()
        r = simulate(arrivals, bucket_s, 5.0, shape, policy, initial)
        if r.name == "mean-hpa":
            base = r
        versus = "n/a"
        if base is not None and r is not base:
            v = judge(r, base, best.first_loads)
            versus = f"{v.pod_hours:.2f}x / {ratio_text(v.delayed, 3)} / {ratio_text(v.cold, 3)}"
        terms = ", ".join(f"{k} {n}" for k, n in sorted(r.terms.items(), key=lambda kv: -kv[1])) or "—"
        print(f"| {r.name} | {r.pod_hours:.1f} | {r.pod_hours / best.pod_hours:.2f} | "
              f"{r.pod_hours / best.cache_pod_hours:.2f} | {r.delayed_ratio:.4f} "
              f"({r.delayed_loading / r.requests if r.requests else 0.0:.4f}, "
              f"{r.refused_requests / r.requests if r.requests else 0.0:.4f}) | {r.cold_loads:,} | "
              f"{gap_cells(r.reload_gaps)} | {r.unused_evictions:,} | {versus} | {terms} | "
              f"{time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
