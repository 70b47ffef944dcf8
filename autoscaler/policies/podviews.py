"""The per-pod half of a runtime's view: one `PodView` per pod, from its aggregate and ranking.

Split from `decision` because it is the one place that builds frozen dataclasses per pod on every refresh,
and builds them through their slots for speed (see `pod_views`).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Final

from autoscaler.model import PodView
from autoscaler.policies.aggregation import Aggregate
from autoscaler.policies.ranking import Ranking

_POD_VIEW_FIELDS: Final = (
    "name", "ready", "fresh", "age_s", "gpu_busy", "requests_per_second", "queue_delay_s", "lru_age_s",
    "cache_used_ratio", "weight", "need", "deletion_cost", "signals",
)
if tuple(f.name for f in fields(PodView)) != _POD_VIEW_FIELDS:  # pragma: no cover - a model change
    raise ImportError("PodView's fields changed: update _POD_VIEW_FIELDS and pod_views in policies/podviews.py")
(
    _set_name, _set_ready, _set_fresh, _set_age, _set_gpu, _set_rps, _set_queue, _set_lru, _set_cache,
    _set_weight, _set_need, _set_cost, _set_signals,
) = (getattr(PodView, name).__set__ for name in _POD_VIEW_FIELDS)


def pod_views(agg: Aggregate, ranking: Ranking, now: float) -> tuple[PodView, ...]:
    """One PodView per pod, in the snapshot's order: ordinary frozen `PodView`s, built through their slots.

    A frozen dataclass's `__init__` sets each field through `object.__setattr__`, about 2 µs for PodView's 13
    fields: at 10,000 pods, more than all the rest of a pod's decision. Writing the slots directly (what
    `object.__setattr__` ends up doing) costs half. Every field is set; the check above fails at import if
    `PodView` gains or reorders one, and tests compare the result with `PodView(...)` field by field.
    """
    new = object.__new__
    views: list[PodView] = []
    append = views.append
    states = agg.pod_signals or ((),) * len(agg.pods)
    for pod, fresh, weight, need, cost, signals in zip(
        agg.pods, agg.fresh, agg.weights, ranking.needs, ranking.costs, states, strict=True
    ):
        t = pod.sampled_at
        view = new(PodView)
        _set_name(view, pod.name)
        _set_ready(view, pod.ready)
        _set_fresh(view, fresh)
        _set_age(view, None if t is None else (age if (age := now - t) > 0.0 else 0.0))
        _set_gpu(view, pod.gpu_busy)
        _set_rps(view, pod.requests_per_second)
        _set_queue(view, pod.queue_delay_s)
        _set_lru(view, pod.lru_age_s)
        _set_cache(view, pod.cache_used_ratio)
        _set_weight(view, weight)
        _set_need(view, need)
        _set_cost(view, cost)
        _set_signals(view, signals)
        append(view)
    return tuple(views)
