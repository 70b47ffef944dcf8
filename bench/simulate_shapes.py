"""The tuning table: every synthetic trace shape x policy, and skew-aware variants against mean-hpa.

For each shape (steady, diurnal, bursty, heavy-tailed, churn, mixed) one seeded day of 500 models is
replayed under mean-hpa and under each skew-aware variant; the table gives each variant's pod-hours,
delayed requests and cold loads as multiples of mean-hpa's (and how many loads moved a leaving pod's models
to the pods that stay, as ModelMesh's pre-shutdown does), and whether it meets the goal on that shape
(at most 0.1x the delayed requests and 0.25x the avoidable cold loads, those beyond the first load of models
that appear after the start, for at most 1.15x the pod-hours; autoscaler/simulation/goal.py). `fixed-max`
(--ceiling) is the bound: maxReplicas all day. The goal column says "met", or the parts missed ("missed:
pod-hours, delayed requests"), as the report's does: it said "delays met" for rows that missed the goal on
pod-hours or cold loads, which read as a pass; on fixed-max's row, the delay part met says the delay part is
within reach of some replica policy on that trace. Plain script:

    python bench/simulate_shapes.py [--hours 24] [--models 500] [--seeds 0] [--fixed] [--ceiling] [--beyond 4,8] \\
        [--min-churn-age 300] \\
        [--hourly] [--events] [--variant 'name:scale_down_tau_s=120,down_window=300,down_pods=1,down_period=120'] ...

A variant sets RuntimePolicy fields (`skew_order`, `target_gpu_busy`, `scale_down_tau_s`, ...) and the HPA's
scale-down behavior (`down_window` s, `down_pods` per `down_period` s) and its tolerances (`up_tolerance`,
`down_tolerance`: `behavior.scaleUp.tolerance` and `scaleDown.tolerance`, Kubernetes 1.35 and later; the
cluster's 0.1 when not given); `deletion_costs=off` leaves the pods'
costs unset, as the adapter's `--deletion-cost off` (the ReplicaSet then removes the newest pod). Without
--variant it runs the shipped defaults.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass, replace

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import apply_overrides
from autoscaler.simulation.cluster import ClusterShape
from autoscaler.simulation.cluster_flag_values import cache_models, min_churn_age, pod_rps
from autoscaler.simulation.engine import PolicyResult, oracle, simulate
from autoscaler.simulation.figures import ratio_text
from autoscaler.simulation.goal import judge
from autoscaler.simulation.hpa_spec import Behavior, ScalingPolicy, ScalingRules
from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SkewAwarePolicy, max_bound
from autoscaler.simulation.report import MOVED_WORDS
from autoscaler.simulation.run_size import peak_need, sizing
from autoscaler.simulation.shapes import SHAPES
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.trace_buckets import buckets

MIN_REPLICAS = 2


@dataclass(frozen=True)
class Variant:
    name: str
    policy: RuntimePolicy
    behavior: Behavior
    deletion_costs: bool = True


def parse_variant(text: str) -> Variant:
    name, _, spec = text.partition(":")
    fields: dict[str, str] = dict(kv.split("=", 1) for kv in spec.split(",") if kv)
    down = SHIPPED_BEHAVIOR.scale_down
    window = int(fields.pop("down_window", down.stabilization_window_s))
    pods = int(fields.pop("down_pods", down.policies[0].value))
    period = int(fields.pop("down_period", down.policies[0].period_s))
    costs = fields.pop("deletion_costs", "on")
    if costs not in ("on", "off"):
        raise SystemExit(f"deletion_costs must be on or off, got {costs!r}")
    up_tolerance = float(fields.pop("up_tolerance")) if "up_tolerance" in fields else None
    down_tolerance = float(fields.pop("down_tolerance")) if "down_tolerance" in fields else None
    behavior = replace(SHIPPED_BEHAVIOR,
                       scale_up=replace(SHIPPED_BEHAVIOR.scale_up, tolerance=up_tolerance),
                       scale_down=ScalingRules(window, "Min", (ScalingPolicy("Pods", pods, period),), down_tolerance))
    return Variant(name or "shipped", apply_overrides(RuntimePolicy(), fields), behavior, costs == "on")


def run_shape(shape_name: str, seed: int, args: argparse.Namespace, variants: list[Variant]
              ) -> tuple[PolicyResult, list[PolicyResult], float, int]:
    trace = synthetic(models=args.models, hours=args.hours, mean_rps=args.rps, shape=shape_name, seed=seed)
    shape = ClusterShape(pod_rps=args.pod_rps, cache_models=args.cache_models, min_churn_age_s=args.min_churn_age,
                         queue_timed=not args.queue_untimed)
    bucket_s, arrivals = buckets(trace, 5.0)
    best = oracle(trace, shape, 600.0, bucket_s)
    fixed, maximum, start = sizing(best.peak_rps, sum(arrivals[0].rates), shape.pod_rps, MIN_REPLICAS, None,
                                   peak_pods=best.peak_pods)
    base = simulate(arrivals, bucket_s, 5.0, shape, MeanHpaPolicy(MIN_REPLICAS, maximum), start)
    results = [simulate(arrivals, bucket_s, 5.0, shape, FixedPolicy(fixed), fixed)] if args.fixed else []
    if args.ceiling:  # the floor of delays: every pod maxReplicas allows, all day
        results.append(simulate(arrivals, bucket_s, 5.0, shape, max_bound(maximum), maximum))
    for factor in args.beyond:  # more pods than maxReplicas allows: how far down delays go with pods alone
        pods = max(MIN_REPLICAS, round(factor * peak_need(best.peak_rps, shape.pod_rps)))
        results.append(simulate(arrivals, bucket_s, 5.0, shape, FixedPolicy(pods, f"fixed-{factor:g}x"), pods))
    for v in variants:
        policy = replace(v.policy, min_replicas=max(MIN_REPLICAS, v.policy.min_replicas or 0), max_replicas=maximum)
        skew = SkewAwarePolicy(policy, MIN_REPLICAS, maximum, v.behavior, deletion_costs=v.deletion_costs)
        results.append(simulate(arrivals, bucket_s, 5.0, shape, skew, start))
    return base, results, best.pod_hours, best.first_loads


def hourly_table(named: list[tuple[str, PolicyResult]]) -> str:
    """Delayed requests and mean replicas per hour of the trace, one column per policy: where a day's delays
    come from (a burst at the start that every policy meets alike, an abrupt shift, ...)."""
    hours = int(max(max(r.timeline.t_s, default=0.0) for _, r in named) // 3600) + 1
    lines = ["| hour | " + " | ".join(f"{name}: delayed (mean replicas)" for name, _ in named) + " |",
             "|---:|" + "---:|" * len(named)]
    for hour in range(hours):
        cells = []
        for _, result in named:
            tl = result.timeline
            at = [i for i, t in enumerate(tl.t_s) if hour * 3600 <= t < (hour + 1) * 3600]
            replicas = sum(tl.replicas[i] for i in at) / len(at) if at else 0.0
            cells.append(f"{sum(tl.delayed[i] for i in at):.0f} ({replicas:.1f})")
        lines.append(f"| {hour} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


UNDONE_S = 60.0
"""A scale-down followed by a scale-up within this many seconds was undone: the removal itself asked for the pods
back (a scale-down's pre-shutdown filled every cache, and the cache term saw pressure)."""


def events_table(named: list[tuple[str, PolicyResult]]) -> str:
    """Per policy: its scale-ups, scale-downs (pods removed), the scale-downs a scale-up undid within `UNDONE_S`,
    and the cold loads of models whose only copy left with a removed pod. Where avoidable cold loads come from: a
    policy that removes a pod only to add one back moves (and evicts) copies for nothing."""
    lines = ["| policy | scale-ups | scale-downs (pods removed) | undone within 60 s | cold loads after a removal |",
             "|---|---:|---:|---:|---:|"]
    for name, result in named:
        events = result.events
        downs = [e for e in events if e.after < e.before]
        undone = sum(1 for e, nxt in itertools.pairwise(events)
                     if e.after < e.before and nxt.after > nxt.before and nxt.at_s - e.at_s <= UNDONE_S)
        lines.append(f"| {name} | {len(events) - len(downs)} | {len(downs)} ({sum(e.before - e.after for e in downs)})"
                     f" | {undone} | {result.cold_loads_after_removal} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The script's flags; the cluster's read by `simulate`'s own converters, so that a value `simulate` refuses
    (`--min-churn-age 1e300`, a churn limit that refused every load) is refused here in the same words."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--rps", type=float, default=150.0)
    parser.add_argument("--pod-rps", type=pod_rps, default=20.0)
    parser.add_argument("--cache-models", type=cache_models, default=100)
    parser.add_argument("--min-churn-age", type=min_churn_age, default=ClusterShape().min_churn_age_s,
                        help="ModelMesh's churn limit in seconds (0: a full pod always evicts, as before it was "
                             "modelled)")
    parser.add_argument("--queue-untimed", action="store_true",
                        help="ModelMesh times no request queue (modelmesh-serving's built-in runtimes without "
                             "perModelConcurrencyLimit): the queue term never decides")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--variant", action="append", default=[], help="name:key=value,... (repeatable)")
    parser.add_argument("--fixed", action="store_true", help="also the fixed policy (replicas for the peak)")
    parser.add_argument("--ceiling", action="store_true",
                        help="also fixed at maxReplicas (twice the peak's need): what no scaling policy beats")
    parser.add_argument("--beyond", type=lambda v: [float(f) for f in v.split(",")], default=[],
                        help="also fixed at these multiples of the peak's need, e.g. 4,8,16 (beyond maxReplicas)")
    parser.add_argument("--hourly", action="store_true",
                        help="after each shape and seed, its delayed requests and replicas hour by hour per policy")
    parser.add_argument("--events", action="store_true",
                        help="after each shape and seed, each policy's scale-ups and scale-downs, the scale-downs "
                             "undone within a minute, and the cold loads of models a removal took")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    variants = [parse_variant(v) for v in args.variant] or [parse_variant("skew-aware:")]
    print(f"| shape | seed | policy | pod-hours | x oracle | delayed ratio | cold loads ({MOVED_WORDS}) | "
          "vs mean-hpa: pod-hours / delayed / avoidable cold | goal |")
    print("|---|---:|---|---:|---:|---:|---:|---|---|")
    started = time.perf_counter()
    for shape_name in args.shapes.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            base, results, oracle_hours, floor = run_shape(shape_name, seed, args, variants)
            print(f"| {shape_name} | {seed} | mean-hpa | {base.pod_hours:.1f} | {base.pod_hours / oracle_hours:.2f} | "
                  f"{base.delayed_ratio:.4f} | {base.cold_loads} ({base.migrated_loads}) | — | |")
            names = (["fixed"] if args.fixed else []) + (["fixed-max"] if args.ceiling else []) + [
                f"fixed-{f:g}x" for f in args.beyond] + [v.name for v in variants]
            for name, r in zip(names, results, strict=True):
                v = judge(r, base, floor)  # cold loads beyond the first loads of models that appear later
                print(f"| {shape_name} | {seed} | {name} | {r.pod_hours:.1f} | {r.pod_hours / oracle_hours:.2f} | "
                      f"{r.delayed_ratio:.4f} | {r.cold_loads} ({r.migrated_loads}) | "
                      f"{v.pod_hours:.2f}x / {ratio_text(v.delayed, 3)} / {ratio_text(v.cold, 3)} | "
                      f"{v.word()} |", flush=True)
            if args.hourly:
                print(f"\n{shape_name}, seed {seed}, hour by hour:\n\n"
                      f"{hourly_table([('mean-hpa', base), *zip(names, results, strict=True)])}\n", flush=True)
            if args.events:
                print(f"\n{shape_name}, seed {seed}, scale events:\n\n"
                      f"{events_table([('mean-hpa', base), *zip(names, results, strict=True)])}\n", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
