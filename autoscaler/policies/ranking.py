"""Which pod to remove first: need per pod, turned into coarse pod-deletion costs (docs/design.md).

The need of a pod is a weighted sum of terms, each scaled to 0..1 within the runtime, with the weights
normalised so that need is 0..1 too:

    need_i = (w_r · r_i / max r  +  w_g · b_i  +  w_c · c_i  +  w_u · u_i / max u) / (w_r + w_g + w_c + w_u)

(a term that no Ready pod reports, such as GPU busy on a CPU runtime, drops out of the sum and its weight).
`u_i` is the number of models only this pod served in the last `target_lru_age_s` (its unique copies): removing
it turns every later request for them into a cold load elsewhere. Request share and GPU busy alone rank an old
quiet pod, which holds the only copies of the quiet models, below a new pod that holds copies of hot ones.
`c_i`, the pod's cache fill (ModelMesh's used / capacity), is a coarser proxy for the same thing, kept for pods
whose exporter reports no per-model use (then the unique term drops out and the needs are those of the three).

A term is anything with a `name` and a `scores(pods, now)` method (`NeedTerm`); `now` is the refresh's clock,
which the unique-copy term judges recency by.

A pod that lacks a term's signal scores None for that term, and None counts as 0: a pod we cannot see is
not protected by that term (it is removed earlier rather than kept on a guess). Not-Ready pods get no need
and no cost: the ReplicaSet removes them first anyway.

Costs are coarse so that they change rarely and are cheap to write: `bucket = min(9, floor(10 · need))`,
`cost = bucket * COST_SPACING`. The spacing of 100 leaves room for an operator's hand-set costs between our
buckets and makes the buckets readable in `kubectl get pods -o yaml`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Final, NamedTuple, Protocol

from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.samples import clean
from autoscaler.policies.slots import slot_builder

COST_BUCKETS: Final = 10
COST_SPACING: Final = 100


class NeedTerm(Protocol):
    """One reason to keep a pod, scored per pod within its runtime."""

    @property
    def name(self) -> str: ...

    def scores(self, pods: Sequence[PodSample], now: float) -> Sequence[float | None]:
        """One score in 0..1 per pod (same order), or None where the pod lacks this signal; `now` is the
        refresh's clock (the pods' `sampled_at` clock)."""
        ...


@dataclass(frozen=True, slots=True)
class RequestShareTerm:
    """`r_i / max r`: the busiest pod scores 1. All idle: every pod scores 0 (none is needed for load)."""

    name: str = "requests"

    def scores(self, pods: Sequence[PodSample], now: float) -> list[float | None]:
        rates = [clean(pod.requests_per_second) for pod in pods]
        top = 0.0
        for r in rates:
            if r is not None and r > top:
                top = r
        if top == 0.0:
            return [None if r is None else 0.0 for r in rates]
        return [None if r is None else r / top for r in rates]


@dataclass(frozen=True, slots=True)
class GpuBusyTerm:
    """`b_i`, already a 0..1 ratio (clamped: a reading above 1 is a full GPU, not more)."""

    name: str = "gpu"

    def scores(self, pods: Sequence[PodSample], now: float) -> list[float | None]:
        return [
            (b if b <= 1.0 else 1.0) if (b := clean(pod.gpu_busy)) is not None else None for pod in pods
        ]


@dataclass(frozen=True, slots=True)
class CacheFillTerm:
    """`c_i`, the share of the pod's model cache in use (0..1, clamped), as ModelMesh reports it.

    A proxy for the models removing the pod would lose: a full cache holds many models, some of them perhaps
    nowhere else; a pod that just started holds few, and those it does hold were copied there because other
    pods had them. The raw ratio rather than `c_i / max c`, so that pods whose caches are all nearly empty
    (a fresh runtime) are not told apart by a handful of models.
    """

    name: str = "cache"

    def scores(self, pods: Sequence[PodSample], now: float) -> list[float | None]:
        return [
            (c if c <= 1.0 else 1.0) if (c := clean(pod.cache_used_ratio)) is not None else None
            for pod in pods
        ]


@dataclass(frozen=True, slots=True)
class UniqueCopyTerm:
    """`u_i / max u`: the pod's unique copies, models it served at or after `now - window_s` that no other
    of the pods (the Ready ones: `pod_needs` hands only those) served then; the pod with the most scores 1,
    and when none holds one every reporting pod scores 0. A pod without per-model data (`recent_models`
    None) scores None. A copy another pod also served is no loss (that pod keeps serving it); a copy only a
    pod that is not Ready served protects nobody, as that pod goes first anyway.

    Counted in one comprehension per pod that keeps its in-window ids (a float comparison the interpreter
    specialises: a fifth cheaper a model than `compress` over `map(operator.le, ...)`), one `Counter` over all of
    them, and a set intersection per pod with the models counted once: it reads every recent model of every pod,
    50 times the pods' count on a runtime whose pods serve 50 models each."""

    window_s: float
    name: str = "unique"

    def scores(self, pods: Sequence[PodSample], now: float) -> list[float | None]:
        return unique_scores(self.counts(pods, now), len(pods))

    def counts(self, pods: Sequence[PodSample], now: float) -> list[int | None] | None:
        """`u_i` per pod (None where the pod reports no per-model use); None when no pod reports it. Shown in
        /debug as each pod's `unique_models`."""
        return self.counts_and_models(pods, now)[0]

    def counts_and_models(
        self, pods: Sequence[PodSample], now: float,
    ) -> tuple[list[int | None] | None, Counter[str]]:
        """`counts`, and how many of the pods served each model in the window (empty when none reports): the
        recommendation's cache need reads how many models that is (`Aggregate.models_in_use`), counted here at no
        cost."""
        models = [pod.recent_models for pod in pods]
        if models.count(None) == len(models):
            return None, Counter()
        since = now - self.window_s
        recent = [None if m is None else [model for model, at in m.items() if at >= since] for m in models]
        servers = Counter(chain.from_iterable(served for served in recent if served))
        once = {model for model, count in servers.items() if count == 1}
        return [None if served is None else len(once.intersection(served)) for served in recent], servers


def unique_scores(counts: Sequence[int | None] | None, pods: int) -> list[float | None]:
    """`u_i / max u` from `UniqueCopyTerm.counts` (every reporting pod 0 when none holds a unique copy)."""
    if counts is None:
        return [None] * pods
    top = max((u for u in counts if u is not None), default=0)
    if top == 0:
        return [None if u is None else 0.0 for u in counts]
    return [None if u is None else u / top for u in counts]


@dataclass(frozen=True, slots=True)
class _Scored:
    """A term whose scores of the Ready pods are already worked out: the unique-copy term's, from the counts
    `rank_pods` keeps for /debug, so that they are counted once."""

    name: str
    known: Sequence[float | None]

    def scores(self, pods: Sequence[PodSample], now: float) -> Sequence[float | None]:
        return self.known


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: NeedTerm
    weight: float


def default_terms(policy: RuntimePolicy) -> tuple[WeightedTerm, ...]:
    """The terms docs/design.md defines, weighted by the policy (a weight of 0 leaves a term out); the
    unique-copy term's window is the policy's `target_lru_age_s`."""
    return (
        WeightedTerm(RequestShareTerm(), policy.need_weight_requests),
        WeightedTerm(GpuBusyTerm(), policy.need_weight_gpu),
        WeightedTerm(CacheFillTerm(), policy.need_weight_cache),
        WeightedTerm(UniqueCopyTerm(policy.target_lru_age_s), policy.need_weight_unique),
    )


def pod_needs(pods: Sequence[PodSample], terms: Sequence[WeightedTerm], now: float) -> list[float | None]:
    """Need (0..1) of every Ready pod; None for pods that are not Ready.

    Terms see only the Ready pods, so `max r` is taken among the pods that can actually be kept. Weights are
    normalised by the sum over the terms some Ready pod reports: on a runtime without GPUs the request share
    alone spans 0..1, so its pods use all ten cost buckets. With no positive weight every Ready pod needs 0.
    """
    ready = [pod for pod in pods if pod.ready]
    ready_needs = _ready_needs(ready, terms, now)
    if len(ready) == len(pods):
        return ready_needs
    it = iter(ready_needs)
    return [next(it) if pod.ready else None for pod in pods]


def _ready_needs(ready: Sequence[PodSample], terms: Sequence[WeightedTerm], now: float) -> list[float | None]:
    """The needs of Ready pods: each pod's weighted sum, in the terms' order, scaled and capped at 1.

    One pass over the pods for up to three reported terms (the default policy has three): this runs per pod
    per refresh, and a pass per term plus one to scale cost as much as the terms' scores themselves. The sum
    starts at 0.0 and adds `w * x` term by term, so the floats are those of the term-by-term form.
    """
    used: list[tuple[float, Sequence[float | None]]] = []
    total_weight = 0.0
    for wt in terms:
        w = wt.weight
        if not w > 0.0:
            continue
        scores = wt.term.scores(ready, now)
        if all(x is None for x in scores):
            continue
        total_weight += w
        used.append((w, scores))
    scale = 1.0 / total_weight if total_weight > 0.0 else 0.0
    if len(used) == 3:
        (w1, s1), (w2, s2), (w3, s3) = used
        needs: list[float | None] = []
        add = needs.append
        for x1, x2, x3 in zip(s1, s2, s3, strict=True):
            s = 0.0
            if x1 is not None:
                s = s + w1 * x1
            if x2 is not None:
                s = s + w2 * x2
            if x3 is not None:
                s = s + w3 * x3
            add(v if (v := s * scale) <= 1.0 else 1.0)
        return needs
    sums = [0.0] * len(ready)
    for w, scores in used:
        sums = [s if x is None else s + w * x for s, x in zip(sums, scores, strict=True)]
    return [v if (v := s * scale) <= 1.0 else 1.0 for s in sums]


def cost_of(need: float) -> int:
    """The deletion cost of a need in 0..1: one of 10 buckets, `COST_SPACING` apart, least needed lowest."""
    bucket = int(need * COST_BUCKETS) if need > 0.0 else 0  # int() floors non-negative values; NaN → 0
    return (bucket if bucket < COST_BUCKETS else COST_BUCKETS - 1) * COST_SPACING


class ReadyTerms(NamedTuple):
    """What the default terms see on a runtime's Ready pods (cleaned signals), noted by the aggregation's
    one pass so that `podviews.examine_pods` can score each pod as it builds its view."""

    top_rate: float  # the highest request rate of a Ready pod; 0 when none reports one
    rated: bool  # some Ready pod reports a request rate
    gpus: bool  # some Ready pod reports GPU busy
    caches: bool  # some Ready pod reports its cache use
    models: bool  # some Ready pod reports its recent models (`recent_models`)
    fresh_models: int = 0  # Ready pods with fresh load data that report them (`Aggregate.models_in_use`)


@dataclass(frozen=True, slots=True)
class Ranking:
    """Needs and deletion costs per pod, in the pods' order; None for pods that are not Ready. `unique_models`:
    each pod's unique copies (`UniqueCopyTerm.counts`, None for a pod not Ready or without per-model data), or
    None when the terms have no unique-copy term or no Ready pod reports per-model use."""

    needs: tuple[float | None, ...]
    costs: tuple[int | None, ...]
    unique_models: tuple[int | None, ...] | None = None


def rank_pods(pods: Sequence[PodSample], terms: Sequence[WeightedTerm], now: float) -> Ranking:
    """Needs and costs of one runtime's pods (`cost_of`, inlined: this runs per pod per refresh); `now`: the
    refresh's clock, for terms that judge recency. The unique-copy term's counts are kept for /debug (whatever
    its weight: they say what the term sees) and its scores made from them."""
    unique: tuple[int | None, ...] | None = None
    for index, wt in enumerate(terms):
        if type(wt.term) is UniqueCopyTerm:
            ready = [pod for pod in pods if pod.ready]
            counts = wt.term.counts(ready, now)
            if counts is not None:
                scored = WeightedTerm(_Scored(wt.term.name, unique_scores(counts, len(ready))), wt.weight)
                terms = (*terms[:index], scored, *terms[index + 1:])
                it = iter(counts)
                unique = tuple([next(it) if pod.ready else None for pod in pods])
            break
    needs = tuple(pod_needs(pods, terms, now))
    top = COST_BUCKETS - 1
    costs = tuple([
        None if need is None else (b if (b := int(need * COST_BUCKETS)) < top else top) * COST_SPACING for need in needs
    ])
    return _ranking(needs, costs, unique)


_ranking: Final = slot_builder(Ranking, ("needs", "costs", "unique_models"))


def removal_order(pods: Sequence[PodSample], needs: Sequence[float | None]) -> list[str]:
    """Ready pods' names, least needed first; equal needs by name, so the order is stable across refreshes."""
    return [name for _, name in sorted((n, p.name) for p, n in zip(pods, needs, strict=True) if n is not None)]
