"""The per-pod half of a runtime's view: its `PodViews`, one row per pod, from its aggregate and ranking.

Split from `decision` because it is the one place that builds something per pod on every refresh (a plain
tuple, `model.PodRow`: see `PodViews` for why not a `PodView`): `pod_views` from an aggregate and any ranking;
`examine_pods`, what the decision calls, aggregates and builds the rows with the default terms' needs and
costs computed on the way (`ranking`'s own formulas, the same floats), so a pod is read twice in all rather
than once per term, once to rank and once to view. `tests/policies/test_fast_path.py` checks on random pods
that both give the same views.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from itertools import repeat
from typing import Final

from autoscaler.model import PodRow, PodSample, PodViews
from autoscaler.policies.aggregation import scan_pods
from autoscaler.policies.bounded_cache import stored
from autoscaler.policies.copies_in_use import counted_copies, fresh_models_in_use
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.ranking import (
    COST_BUCKETS,
    COST_SPACING,
    CacheFillTerm,
    GpuBusyTerm,
    Ranking,
    RequestShareTerm,
    UniqueCopyTerm,
    WeightedTerm,
    rank_pods,
)
from autoscaler.policies.runtime_aggregate import Aggregate, set_models_in_use
from autoscaler.policies.signals import ALL_FRESH
from autoscaler.policies.slots import slot_builder

_pod_views: Final = slot_builder(PodViews, ("rows",))
"""`PodViews(rows)` through its slot (`slots`): once a runtime, where `PodViews`' own `__init__` cost as much as
the rows of several pods."""


def pod_views(agg: Aggregate, ranking: Ranking, now: float) -> PodViews:
    """The pods' views from an aggregate and any ranking, in the snapshot's order."""
    rows: list[PodRow] = []
    states = agg.pod_signals or ((),) * len(agg.pods)
    unique = ranking.unique_models or (None,) * len(agg.pods)
    for pod, fresh, weight, need, cost, signals, unique_models in zip(
        agg.pods, agg.fresh, agg.weights, ranking.needs, ranking.costs, states, unique, strict=True
    ):
        t = pod.sampled_at
        rows.append((
            pod.name, pod.ready, fresh, None if t is None else (age if (age := now - t) > 0.0 else 0.0),
            pod.gpu_busy, pod.requests_per_second, pod.queue_delay_s, pod.lru_age_s, pod.cache_used_ratio,
            weight, need, cost, signals, unique_models,
        ))
    return _pod_views(tuple(rows))


_COSTS: Final = tuple(min(bucket, COST_BUCKETS - 1) * COST_SPACING for bucket in range(COST_BUCKETS + 1))
"""`rank_pods`' cost of a need in 0..1, by `int(need * COST_BUCKETS)` (10 for a need of exactly 1)."""


_Weights = tuple[float, float, float, float]
"""The weights of `ranking.default_terms`' terms, in its order (the unique-copy term's 0 when it is absent)."""


def _default_weights(terms: Sequence[WeightedTerm]) -> _Weights | None:
    """The weights of `ranking.default_terms`' terms (the three signal terms, and the unique-copy term when it
    is there), in its order; None for any other terms."""
    if (3 <= len(terms) <= 4 and type(terms[0].term) is RequestShareTerm and type(terms[1].term) is GpuBusyTerm
            and type(terms[2].term) is CacheFillTerm):
        if len(terms) == 3:
            return terms[0].weight, terms[1].weight, terms[2].weight, 0.0
        if type(terms[3].term) is UniqueCopyTerm:
            return terms[0].weight, terms[1].weight, terms[2].weight, terms[3].weight
    return None


_WEIGHTS_BY_ID: dict[int, tuple[Sequence[WeightedTerm], _Weights | None]] = {}
"""id(terms) → (terms, `_default_weights(terms)`): one entry per policy's terms tuple, bounded
(`_WEIGHTS_BY_ID_BOUND`)."""

_WEIGHTS_BY_ID_BOUND: Final = 4096
"""`_WEIGHTS_BY_ID` is cleared at this many entries: one per policy's terms (`policy_terms.terms_and_bounds`, at most
one per runtime), each a small tuple that keeps its terms alive, well under a megabyte in all. A miss only
costs `_default_weights`' few type checks, so a fleet with more runtimes than this loses little by clearing."""


def _weights_of(
    terms: Sequence[WeightedTerm],
) -> tuple[Sequence[WeightedTerm], _Weights | None]:
    """`_default_weights(terms)`, kept by the identity of `terms` (the decision hands the same tuple for a
    policy every time: `policy_terms.terms_and_bounds`); the entry keeps `terms` alive, so its id is not reused
    while cached (cleared at `_WEIGHTS_BY_ID_BOUND`)."""
    hit = (terms, _default_weights(terms))
    if type(terms) is tuple:  # (a list could change under its id; the weighted terms themselves are frozen)
        stored(_WEIGHTS_BY_ID, id(terms), hit, _WEIGHTS_BY_ID_BOUND)
    return hit


def examine_pods(
    pods: Sequence[PodSample], policy: RuntimePolicy, now: float, seen: Collection[str],
    terms: Sequence[WeightedTerm],
) -> tuple[Aggregate, PodViews]:
    """`aggregate(pods, policy, now, seen)` and `pod_views(agg, rank_pods(agg.pods, terms, now), now)`, in two
    passes over the pods: the aggregation's, which also notes what the need terms see on Ready pods
    (`ReadyTerms`), and this one, which scores each pod with the default terms (`_ready_needs`' sum, term
    by term in the terms' order, and `rank_pods`' cost buckets) as it builds its row. Other terms go the
    general way. When some Ready pod reports its recent models, the unique-copy term's counts
    (`UniqueCopyTerm.counts`, shown in /debug whatever the term's weight) are counted first and scored on the
    way as the fourth term (`unique_scores`' `u_i / max u`); when none does, the term drops out, and the rows
    are those of the three signal terms.

    Hand-optimised: its plain version is `plain_aggregate`, `plain_rank_pods` and `plain_pod_views` in
    tests/policies/plain_policies.py, and tests/policies/test_fast_path.py checks on random pods that both give
    the same aggregate and views."""
    hit = _WEIGHTS_BY_ID.get(id(terms))
    if hit is None or hit[0] is not terms:
        hit = _weights_of(terms)
    weights = hit[1]
    unique_term = terms[3].term if len(terms) == 4 else None
    # The unique-copy term counts the models the Ready pods served in the policy's window, and on how many pods:
    # the cache need's `models_in_use` (copies) is read off that count (below) rather than counted twice.
    by_term = (weights is not None and type(unique_term) is UniqueCopyTerm
               and unique_term.window_s == policy.target_lru_age_s)
    agg, seen_terms = scan_pods(pods, policy, now, seen, not by_term)
    if weights is None:
        return agg, pod_views(agg, rank_pods(agg.pods, terms, now), now)
    top, rated, gpus, caches, models, fresh_models = seen_terms
    w_r, w_g, w_c, w_u = weights
    uniques: Iterable[int | None] = repeat(None)
    top_u = 0
    counted = False
    if models and isinstance(unique_term, UniqueCopyTerm):
        counts, served = unique_term.counts_and_models([pod for pod in agg.pods if pod.ready], now)
        if counts is not None:  # (some Ready pod reports: `models`)
            top_u = max((u for u in counts if u is not None), default=0)
            it = iter(counts)
            uniques = [next(it) if pod.ready else None for pod in agg.pods]
            counted = True
        if by_term and fresh_models:
            # The term counted every Ready pod's models; the need counts only those of the fresh ones, the same
            # pods unless some Ready pod is stale (then the models only stale pods served are taken off).
            set_models_in_use(agg, counted_copies(served) if agg.n == agg.ready else fresh_models_in_use(
                served, agg.pods, agg.fresh, now - policy.target_lru_age_s))
    # A term counts when its weight is positive and some Ready pod reports its signal (`_ready_needs`).
    use_r = w_r > 0.0 and rated
    use_g = w_g > 0.0 and gpus
    use_c = w_c > 0.0 and caches
    use_u = w_u > 0.0 and counted
    total = 0.0
    if use_r:
        total += w_r
    if use_g:
        total += w_g
    if use_c:
        total += w_c
    if use_u:
        total += w_u
    by_unique = use_u and top_u > 0  # `unique_scores` scores every pod 0 when none holds a unique copy: adds 0
    scale = 1.0 / total if total > 0.0 else 0.0
    by_rate = use_r and top != 0.0  # `RequestShareTerm` scores every pod 0 when the busiest is idle: adds 0
    costs, buckets = _COSTS, float(COST_BUCKETS)
    trunc = math.trunc  # `int(x)` for a float, without `int`'s type call: a tenth of a pod's row
    rows: list[PodRow] = []
    # (`zip` without `strict`: the aggregate's per-pod tuples have one entry per pod by construction, and any
    # keyword sends `zip` down its slow path, which costs as much as a small runtime's pod)
    # The usual pod (every signal fresh: Ready, its stamp fresh, GPU busy and request rate there), when every
    # term counts and it reports its cache use too, is told by its states' identity (`signals.ALL_FRESH`) and
    # scored in one expression: the general branch's sum without its tests. `0.0 + x` is `x` but for a -0.0,
    # so the sum starts at its first term, and `or 0.0` turns the one -0.0 it could then give (every term
    # -0.0) into the 0.0 the general branch gives.
    usual = ALL_FRESH if by_rate and use_g and use_c else None
    age_s: float | None
    for pod, fresh, weight, signals, u in zip(agg.pods, agg.fresh, agg.weights, agg.pod_signals, uniques):  # noqa: B905
        b = pod.gpu_busy
        r = pod.requests_per_second
        c = pod.cache_used_ratio
        ready = pod.ready
        need: float | None
        cost: int | None
        if signals is usual and c is not None:
            age_s = now - pod.sampled_at  # type: ignore[operator]  # fresh: it has a stamp
            if not age_s > 0.0:
                age_s = 0.0
            need = (w_r * (r / top) + w_g * (b if b <= 1.0 else 1.0)  # type: ignore[operator]  # all there
                    + w_c * (c if c <= 1.0 else 1.0) or 0.0)
            if by_unique and u:
                need = need + w_u * (u / top_u)
            need = need * scale
            if not need <= 1.0:
                need = 1.0
            rows.append((pod.name, ready, fresh, age_s, b, r, pod.queue_delay_s, pod.lru_age_s, c, weight, need,
                         costs[trunc(need * buckets)], signals, u))
            continue
        t = pod.sampled_at
        age_s = None if t is None else (age if (age := now - t) > 0.0 else 0.0)
        if ready:
            s = 0.0
            if by_rate and r is not None:
                s += w_r * (r / top)
            if use_g and b is not None:
                s += w_g * (b if b <= 1.0 else 1.0)
            if use_c and c is not None:
                s += w_c * (c if c <= 1.0 else 1.0)
            if by_unique and u is not None:
                s += w_u * (u / top_u)
            need = v if (v := s * scale) <= 1.0 else 1.0
            cost = costs[trunc(need * buckets)]
        else:
            need = cost = None
        rows.append((pod.name, ready, fresh, age_s, b, r, pod.queue_delay_s, pod.lru_age_s, c, weight, need, cost,
                     signals, u))
    return agg, _pod_views(tuple(rows))
