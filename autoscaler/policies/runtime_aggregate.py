"""The runtime values of one refresh (`Aggregate`), as `aggregation.scan_pods` makes them and the recommendation,
the pod views and the decision read them: the record apart from the pass that fills it, so a reader of the values
needs no part of the hand-optimised pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from autoscaler.model import PodSample
from autoscaler.policies.signals import SignalStats

__all__ = ["Aggregate", "PodSignals", "set_models_in_use"]

PodSignals = tuple[tuple[tuple[str, str], ...], ...]
"""`Aggregate.pod_signals`: per pod, (signal, state) for each signal."""


@dataclass(frozen=True, slots=True)
class Aggregate:
    """The runtime values of one refresh, with enough per-pod detail to explain them.

    Per-pod tuples follow the order of the pods given to `aggregate`. `n` counts the Ready pods with fresh
    load data (the ModelMesh collector); each signal's own count is in `signals`: pods we cannot see never
    add invented load. A stale pod is seen at its last good sample, and counts at those values in the means while
    that sample is recent (`HELD_SAMPLE_S`; `gpu_pods`, `rate_pods`): a gap that short neither raises nor lowers
    them. In the cache it counts in nothing (`cache_pods`): its last room is no evidence of room now.
    """

    pods: tuple[PodSample, ...]  # the input pods (valid already: `PodSample`)
    fresh: tuple[bool, ...]  # Ready with fresh load data (the ModelMesh collector)
    weights: tuple[float, ...]  # share of Σ r_i^p (0..1); 0 for pods not used or without a request rate
    ready: int
    n: int
    coverage: float  # n / ready; 0 when no pod is Ready (nothing to judge by: unknown, never "idle")
    # M_p(b) over the pods with the GPU fresh and those held at their last reading (`gpu_pods`); None when none is fresh
    gpu_busy: float | None
    request_rate: float | None  # M_p(r) per pod, likewise (`rate_pods`); None when no pod has a fresh request rate
    # target_lru_age_s / global LRU age (docs/design.md, Aggregation); 0 when some pod has room; None when no fresh
    # pod reports its cache
    cache_pressure: float | None
    cache_full: bool  # no fresh pod has room and at least one is known full
    # The oldest timestamp behind the values: the signals used, and the last sample of each Ready pod whose stale
    # load or GPU reading holds values (they stand on it too). Honest freshness: the `timestamp` served.
    oldest_sample_at: float | None
    queue_excess_s: float = 0.0  # Σ max(0, q_i - target_queue_delay_s): the backlog beyond the target
    saturated: int = 0  # pods with q_i > target_queue_delay_s
    # Every signal of SIGNALS, in that order, when built by `aggregate` (`recommend` and `decide` read it as is).
    signals: Mapping[str, SignalStats] = field(default_factory=dict)
    pod_signals: PodSignals = ()  # per pod: (signal, state) for each signal
    # The cache need (docs/design.md, Recommendation): the copies the Ready pods with fresh load data served
    # within `target_lru_age_s` of `now` (their `recent_models`; a model served on two pods counts twice, as a
    # scale-down's pre-shutdown moves both), None when none of them reports per-model use; a pod's capacity in
    # models (`models_loaded / cache_used_ratio`, the mean over those of them that report both), None when none
    # does; and the Ready pods with fresh load data that report no per-model use while
    # others do, or while the runtime did before (`SIGNAL_MODELS` in `seen`): the term that reads it then holds.
    models_in_use: int | None = None
    pod_capacity: float | None = None
    models_missing: int = 0
    # The oldest timestamp among the fresh signals used, without the held pods' last samples: how far behind
    # the source is (`modelmesh_autoscaler_metric_freshness_seconds`). One dead exporter on a Ready pod dates
    # the `timestamp` back (`oldest_sample_at`) but says nothing of the source's lag, which an adapter-wide
    # alert reads; that pod has its own alerts (ModelMeshExporterDown, ModelMeshRuntimeDataMissing).
    fresh_sample_at: float | None = None
    # The shortest `--model-recency-horizon` the exporters of the Ready pods reporting per-model use (fresh or not:
    # a setting, not a reading, so a pod turning stale does not make it come and go) say they keep a served model
    # for (`PodSample.recency_horizon_s`); None where none says. Below `target_lru_age_s`, U counts only the
    # copies served within it: the cache term holds (`recommend`) and the view warns (`decide`).
    recency_horizon_s: float | None = None
    # How many pods the power means `gpu_busy` and `request_rate` are taken over: the Ready pods with the signal
    # fresh, and those whose signal is held (stale, with a last good value in their sample no older than
    # `HELD_SAMPLE_S`), counted at that value (docs/design.md, Missing data). So `gpu_pods x gpu_busy` and
    # `rate_pods x request_rate` are the terms' `n x M_p`, and a gap neither lowers nor raises them: left out, nine
    # idle pods of twenty raised M_p(b) by 12%. `weights` are the shares over the same pods.
    gpu_pods: int = 0
    rate_pods: int = 0
    # The n of the cache term (`n x min(cap, cache_pressure)`): the Ready pods with cache signals fresh, which alone
    # answer the cache question (one with room settles it, the oldest LRU age of the full ones sets it): a stale
    # pod's last room may have filled since, and taken as room it pinned the pressure at 0 while the fresh pods'
    # copies used 30 s before were evicted; counted in n as full, it raised the term past the contract's (DESIGN §5).
    cache_pods: int = 0


set_models_in_use: Final = Aggregate.__dict__["models_in_use"].__set__
"""Sets `Aggregate.models_in_use` on an aggregate `scan_pods` just made with `count_models` False, before anyone
else sees it (its slot's own setter: the frozen dataclass's `__setattr__` refuses)."""
