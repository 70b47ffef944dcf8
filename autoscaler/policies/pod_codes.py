"""A runtime's per-pod tuples from the state codes of `aggregation.scan_pods`'s pass: which pods are fresh, each
signal's stats and each pod's signal states, all of which follow from the codes (`signals.NOT_READY`), looked up
for a small runtime whose codes repeat from refresh to refresh; and, where the request rates' shares need them,
which pods' rates were counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Final, TypeVar

from autoscaler.model import PodSample
from autoscaler.policies.bounded_cache import stored
from autoscaler.policies.runtime_aggregate import PodSignals
from autoscaler.policies.signals import (
    LOAD_TIME_FRESH,
    NOT_READY,
    USED_REQUESTS,
    SignalStats,
    signal_stats,
    state_table,
)

__all__ = ["counted_pods", "per_pod_cached", "rated_pods"]

T = TypeVar("T")

_LOAD_FRESH: Final = tuple(bool(code & LOAD_TIME_FRESH) for code in range(NOT_READY + 1))
"""Whether a pod's load time is fresh (`Aggregate.fresh`), by state code."""

_SMALL_RUNTIME: Final = 16
"""Up to this many pods, a runtime's per-pod tuples are looked up by its state codes (`_BY_CODES`): building
and hashing the key costs less than the lookups and calls it saves."""

_PerPod = tuple[tuple[bool, ...], dict[str, SignalStats], PodSignals]
"""`Aggregate.fresh`, `.signals` and `.pod_signals` (`_per_pod`)."""

_BY_CODES: dict[tuple[object, ...], _PerPod] = {}
"""(expected, *codes) → `_per_pod`'s result: shared, never mutated, bounded (`_BY_CODES_BOUND`)."""

_BY_CODES_BOUND: Final = 4096
"""`_BY_CODES` is cleared at this many entries (a few hundred bytes each, a megabyte or two in all); a cleared
cache only costs rebuilding its entries."""


def per_pod_cached(
    codes: list[int], expected: tuple[bool, bool, bool, bool], fresh: tuple[int, int, int, int], ready: int,
    gpu_absent: int,
) -> _PerPod:
    """`_per_pod`, looked up by the codes for a small runtime (`_SMALL_RUNTIME`): its codes repeat from refresh
    to refresh (and across runtimes), so the per-pod tuples and the signal stats they imply come from one
    lookup (`_BY_CODES`) rather than four calls."""
    if len(codes) > _SMALL_RUNTIME:
        return _per_pod(codes, expected, fresh, ready, gpu_absent)
    key = (expected, *codes)
    found = _BY_CODES.get(key)
    if found is None:
        found = stored(_BY_CODES, key, _per_pod(codes, expected, fresh, ready, gpu_absent), _BY_CODES_BOUND)
    return found


def _per_pod(
    codes: list[int], expected: tuple[bool, bool, bool, bool], fresh: tuple[int, int, int, int], ready: int,
    gpu_absent: int,
) -> _PerPod:
    """`Aggregate.fresh`, `.signals` and `.pod_signals` from the pods' state codes: all three follow from the
    codes and `expected` (the counts, which the pass kept, are the codes' bits counted)."""
    return (_looked_up(_LOAD_FRESH, codes), signal_stats(fresh, expected, ready, gpu_absent),
            _looked_up(state_table(expected), codes))


def _looked_up(table: tuple[T, ...], codes: list[int]) -> tuple[T, ...]:
    """`tuple(table[code] for code in codes)`, with the lookups in C (`itemgetter`): half the cost of a
    comprehension, for two tuples a pod (`Aggregate.fresh` and `pod_signals`)."""
    if len(codes) > 1:
        return itemgetter(*codes)(table)  # type: ignore[no-any-return]  # a tuple for two codes or more
    return (table[codes[0]],) if codes else ()


def rated_pods(codes: list[int], rated: int) -> Sequence[int]:
    """The indices of the pods whose request rate was used (the pods counted in `rps`), in order."""
    if rated == len(codes):
        return range(rated)
    return [i for i, code in enumerate(codes) if code & USED_REQUESTS]


def counted_pods(codes: list[int], pods: Sequence[PodSample], held_from: float) -> Sequence[int]:
    """The indices of the pods whose request rate counts, in order: fresh (`rated_pods`), or held at a last good
    rate sampled since `held_from` (a Ready pod whose load time is stale, as `aggregation.scan_pods` counts it).
    Found again only where every counted rate is 0 (`rate_summary`), rather than noted for every held pod."""
    return [i for i, (code, pod) in enumerate(zip(codes, pods, strict=True))
            if code & USED_REQUESTS or (code != NOT_READY and not code & LOAD_TIME_FRESH
                                        and pod.requests_per_second is not None and pod.sampled_at is not None
                                        and pod.sampled_at >= held_from)]
