"""The warnings a runtime's view carries, which the refresh says: no capacity signal (no GPU on any pod and
`target_rps_per_pod` not set, so the recommendation never falls below the Ready pods), and the exporters keeping
per-model use for less than `target_lru_age_s` (`recency_horizon`).
"""

from __future__ import annotations

from autoscaler.model import RuntimeKey
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.recency_horizon import short_horizon_warning
from autoscaler.policies.recommendation import NO_CAPACITY_SETTING
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.signals import SIGNAL_GPU

__all__ = ["no_capacity_signal", "view_warnings"]


def no_capacity_signal(agg: Aggregate, policy: RuntimePolicy) -> bool:
    """Whether the runtime has no capacity signal at all: no pod reports a GPU, fresh or not, and
    `target_rps_per_pod` is not set. Not a GPU reading fresh on too few pods, though that too leaves the
    recommendation at the Ready pods: the reason says so already, and this warning (logged once a runtime, for
    good) would name the wrong setting."""
    gpu = agg.signals[SIGNAL_GPU]
    return gpu.fresh + gpu.missing == 0 and policy.target_rps_per_pod is None


def _no_capacity_warning(key: object) -> str:
    return (
        f"runtime {key}: no capacity signal (no pod reports a GPU and {NO_CAPACITY_SETTING} is not set); "
        f"the recommendation never falls below the Ready pods. Set {NO_CAPACITY_SETTING} (config file or "
        f"annotation autoscaler.modelmesh.io/{NO_CAPACITY_SETTING.replace('_', '-')}) to let it scale down"
    )


def view_warnings(
    key: RuntimeKey, no_capacity: bool, short_horizon_s: float | None, target_lru_age_s: float,
) -> tuple[str, ...]:
    """The view's warnings, said by the refresh: no capacity signal (a fleet's in one line), and the exporters'
    `short_horizon_s` below `target_lru_age_s` (once per change); None: not short."""
    warnings: tuple[str, ...] = (_no_capacity_warning(key),) if no_capacity else ()
    if short_horizon_s is not None:
        warnings = (*warnings, short_horizon_warning(key, short_horizon_s, target_lru_age_s))
    return warnings
