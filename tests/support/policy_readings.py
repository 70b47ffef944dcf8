"""What tests read off a pod sample or an aggregate that the policies themselves read inline, in their hot paths."""

from __future__ import annotations

from autoscaler.model import PodSample
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.samples import fresh_time
from autoscaler.policies.signals import SignalStats


def is_fresh(pod: PodSample, now: float, max_staleness_s: float) -> bool:
    """A pod's load data is fresh when no older than `max_staleness_s` (future stamps count as fresh)."""
    return fresh_time(pod.sampled_at, now, max_staleness_s)


def stats_of(agg: Aggregate, signal: str) -> SignalStats:
    """The coverage of one signal of SIGNALS (every aggregate carries all of them: `Aggregate.signals`)."""
    return agg.signals[signal]


def request_load(agg: Aggregate) -> float | None:
    """`n_r * M_p(r)`: the effective request rate of the runtime (docs/design.md), as the decision serves it; `n_r`
    counts the pods held at their last rate too (`Aggregate.rate_pods`)."""
    if agg.request_rate is None:
        return None
    return agg.rate_pods * agg.request_rate
