"""What one runtime's decision carries to the next refresh (`RuntimeMemory`), and how it forgets a signal its
pods stopped having: the GPU once every Ready pod says it has no GPU collector (`gpu_forgetting`), per-model use
once no fresh Ready pod has reported it for `target_lru_age_s` (`models_forgetting`). `decide` takes one and
returns the next, with the signals seen so far (`next_seen`) and the term proposals to hold (`remembered`); the
refresh loop keeps them, one per runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from autoscaler.model import RuntimeKey
from autoscaler.names import ServedMetric
from autoscaler.policies.gpu_forgetting import forget_gpu
from autoscaler.policies.models_forgetting import forget_models
from autoscaler.policies.recommendation import CACHE, GPU, QUEUE, REQUESTS
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.signals import SIGNAL_MODELS, SIGNALS
from autoscaler.policies.smoothing import SmoothState
from autoscaler.policies.unready_pods import UnreadyClocks


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """What one runtime's decision carries to the next refresh; `decide` returns a new one."""

    smoothed: Mapping[ServedMetric, SmoothState] = field(default_factory=dict)
    consecutive_misses: int = 0  # refreshes in a row that were not complete
    known: bool = False  # whether the last view was served at all
    proposals: Mapping[str, int] = field(default_factory=dict)  # each term's last proposal, for holds
    # Signals the runtime has reported: not reported now means missing. But the GPU once every Ready pod says it
    # has no GPU collector: then it is forgotten (`gpu_forgetting`); and per-model use once no Ready pod has
    # reported it for `target_lru_age_s` (`models_forgetting`).
    seen: frozenset[str] = frozenset()
    warned_no_capacity: bool = False  # the no-capacity warning was logged for this runtime
    models_reported_at: float | None = None  # the running clock's time a fresh Ready pod last reported per-model use
    # The pods not Ready held as missing data at this refresh (`unready_pods`), so that the one left out once it
    # stayed not Ready too long is said once.
    unready: frozenset[str] = frozenset()
    # Each pod not Ready with an `unready_since`: its hold's start on the running clock (`unready_pods`).
    unready_clocks: UnreadyClocks = field(default_factory=dict)


NO_MEMORY: Final = RuntimeMemory()
"""A runtime's memory before its first refresh (immutable, so one object serves every runtime)."""


def without_gpu(key: RuntimeKey, memory: RuntimeMemory) -> RuntimeMemory:
    """`memory` without the GPU, once every Ready pod says it has no GPU collector (`gpu_forgetting`, which logs
    it)."""
    seen, proposals, smoothed = forget_gpu(key, memory.seen, memory.proposals, memory.smoothed)
    return replace(memory, seen=seen, proposals=proposals, smoothed=smoothed)


def without_models(
    key: RuntimeKey, memory: RuntimeMemory, unreported_s: float, target_lru_age_s: float,
) -> RuntimeMemory:
    """`memory` without per-model use, once no fresh Ready pod has reported it for `target_lru_age_s`
    (`models_forgetting`, which logs it); `unreported_s`: for how long none has."""
    seen, proposals = forget_models(key, memory.seen, memory.proposals, unreported_s, target_lru_age_s)
    return replace(memory, seen=seen, proposals=proposals)


_ALL_SIGNALS: Final = frozenset(SIGNALS)
_WITH_MODELS: Final = frozenset((*SIGNALS, SIGNAL_MODELS))
"""Every signal and per-model use (`signals.SIGNAL_MODELS`): `seen` of a runtime whose exporters report it all."""
_MODELS: Final = frozenset((SIGNAL_MODELS,))


def next_seen(seen: frozenset[str], reported_signals: frozenset[str], agg: Aggregate) -> frozenset[str]:
    """The runtime's `seen` for its next memory (`RuntimeMemory.seen`)."""
    # The signals reported so far: the same set (object) while no new one appears, as on most refreshes
    # (`is`: equal frozensets would still be compared element-wise); per-model use too, once a fresh pod reports it.
    if seen is _ALL_SIGNALS:
        if agg.models_in_use is not None:
            seen = _WITH_MODELS
    elif seen is not _WITH_MODELS:
        if not reported_signals <= seen:
            seen = seen | reported_signals
        if agg.models_in_use is not None and SIGNAL_MODELS not in seen:
            seen = seen | _MODELS
        if seen == _ALL_SIGNALS:
            seen = _ALL_SIGNALS
        elif seen == _WITH_MODELS:
            seen = _WITH_MODELS
    return seen


def remembered(proposals: Mapping[str, int | None]) -> dict[str, int]:
    """The term proposals to hold next time: this refresh's (after holds), for the terms that proposed, in
    `SIGNAL_OF`'s order (unrolled: it runs for every known runtime; `recommend` lists every term)."""
    remembered: dict[str, int] = {}
    if (value := proposals[GPU]) is not None:
        remembered[GPU] = value
    if (value := proposals[REQUESTS]) is not None:
        remembered[REQUESTS] = value
    if (value := proposals[QUEUE]) is not None:
        remembered[QUEUE] = value
    if (value := proposals[CACHE]) is not None:
        remembered[CACHE] = value
    return remembered
