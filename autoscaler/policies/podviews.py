"""The per-pod half of a runtime's view: one `PodView` per pod, from its aggregate and ranking.

Split from `decision` because it is the one place that builds frozen dataclasses per pod on every refresh,
and builds them through their slots for speed (see `pod_views`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import fields
from itertools import repeat
from operator import attrgetter
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
    `object.__setattr__` ends up doing) costs half, and writing them a field at a time over all pods
    (`map` calling each slot's setter, `attrgetter` reading the pods' fields) leaves the interpreter's loop
    out of it: only the age is computed in Python. Every field is set; the check above fails at import if
    `PodView` gains or reorders one, and tests compare the result with `PodView(...)` field by field.
    """
    pods = agg.pods
    count = len(pods)
    states = agg.pod_signals or ((),) * count
    columns = (agg.fresh, agg.weights, ranking.needs, ranking.costs, states)
    if any(len(column) != count for column in columns):  # what zip(..., strict=True) refused before
        raise ValueError(f"pod_views: {count} pods but per-pod columns of {[len(c) for c in columns]}")
    views = list(map(_new, repeat(PodView, count)))
    _fill(map(_set_name, views, map(_name, pods)))
    _fill(map(_set_ready, views, map(_ready, pods)))
    _fill(map(_set_fresh, views, agg.fresh))
    _fill(map(_set_age, views, [
        None if t is None else (age if (age := now - t) > 0.0 else 0.0) for t in map(_sampled_at, pods)
    ]))
    _fill(map(_set_gpu, views, map(_gpu, pods)))
    _fill(map(_set_rps, views, map(_rps, pods)))
    _fill(map(_set_queue, views, map(_queue, pods)))
    _fill(map(_set_lru, views, map(_lru, pods)))
    _fill(map(_set_cache, views, map(_cache, pods)))
    _fill(map(_set_weight, views, agg.weights))
    _fill(map(_set_need, views, ranking.needs))
    _fill(map(_set_cost, views, ranking.costs))
    _fill(map(_set_signals, views, states))
    return tuple(views)


_new: Final = object.__new__
_fill: Final[Callable[[Iterable[object]], None]] = deque[object](maxlen=0).extend
"""Runs an iterator to its end, keeping nothing: the setters return None."""
(_name, _ready, _sampled_at, _gpu, _rps, _queue, _lru, _cache) = (
    attrgetter(name) for name in (
        "name", "ready", "sampled_at", "gpu_busy", "requests_per_second", "queue_delay_s", "lru_age_s",
        "cache_used_ratio",
    )
)
