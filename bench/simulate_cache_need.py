"""A proposed cache-need floor for the decision, tried on the tuning shapes: not shipped (docs/design.md,
Recommendation, has no such term).

skew-aware's avoidable cold loads on mixed traces (0.30x mean-hpa's, goal 0.25x) come from one scale-down a
day, 5 pods to 4, at night: the runtime uses about 425 models within `target_lru_age_s` (600 s), more than 4
pods of 100 copies hold, so the leaving pod's recently used models find every remaining cache full of copies
under ModelMesh's 300 s churn limit, are refused, lost, and loaded again within minutes (docs/simulation.md,
the last section). The cache term did not hold the fifth pod: it proposes only while *every* cache is full,
and it measures pressure by the oldest copy anywhere, which a few stale copies keep hours old.

The rule tried here holds what the cache oracle counts: at least `ceil(U / C)` pods, where U is the models
the Ready pods served within `target_lru_age_s` (from their per-model last use, `recent_models`, as the
unique-copy need term reads it) and C a pod's capacity in models (`models_loaded / cache_used_ratio`, the mean
over those pods), capped at maxReplicas. It wraps the decision's `recommend` for this run only: the shipped
code is unchanged. Runs `bench/simulate_shapes.py` with the same arguments:

    python bench/simulate_cache_need.py --seeds 0,1 [--shapes mixed] [--variant ...]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run as `python bench/simulate_cache_need.py`: its sibling is bench.simulate_shapes

from autoscaler.policies import decision  # noqa: E402
from autoscaler.policies.aggregation import Aggregate  # noqa: E402
from autoscaler.policies.policy import RuntimePolicy  # noqa: E402
from autoscaler.policies.recommendation import CACHE, Recommendation, recommend  # noqa: E402

_shipped = recommend  # what `decision` calls by that name


def cache_need(agg: Aggregate, policy: RuntimePolicy) -> int | None:
    """Pods to hold the models the Ready pods served within `target_lru_age_s`; None without per-model data."""
    in_use: set[str] = set()
    capacities: list[float] = []
    for pod in agg.pods:
        if not pod.ready or pod.recent_models is None or pod.sampled_at is None:
            continue
        if not pod.cache_used_ratio or not pod.models_loaded:
            continue
        since = pod.sampled_at - policy.target_lru_age_s
        in_use.update(model for model, at in pod.recent_models.items() if at >= since)
        capacities.append(pod.models_loaded / pod.cache_used_ratio)
    if not capacities:
        return None
    return math.ceil(len(in_use) / (sum(capacities) / len(capacities)) - 1e-9)


def recommend_with_cache_need(agg: Aggregate, policy: RuntimePolicy,
                              held: Mapping[str, int] | None = None) -> Recommendation:
    """The shipped recommendation, raised to the cache need (within maxReplicas) where that is more."""
    rec = _shipped(agg, policy, held)
    need = cache_need(agg, policy)
    if need is None:
        return rec
    if policy.max_replicas is not None:
        need = min(need, policy.max_replicas)
    if need <= rec.desired:
        return rec
    proposals = dict(rec.proposals)
    proposals[CACHE] = max(need, proposals.get(CACHE) or 0)
    return replace(rec, desired=need, winner=CACHE, proposals=proposals)


def main() -> None:
    vars(decision)["recommend"] = recommend_with_cache_need  # this run only: the name `decide` calls
    from bench.simulate_shapes import main as shapes

    shapes()


if __name__ == "__main__":
    main()
