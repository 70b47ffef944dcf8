"""Per-runtime scaling policy: the targets and limits of docs/configuration.md (Policy), one typed field each.

Defaults here are the built-in defaults docs/configuration.md lists. A config file (`--config`) replaces them for all or
some runtimes, and `autoscaler.modelmesh.io/<key-with-dashes>` annotations on a runtime's Deployment
override single fields (see `autoscaler.policies.config`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Final

PROPOSAL_LIMIT: Final = 1_000_000
"""No proposal exceeds this many pods, so absurd (but finite) inputs cannot overflow an integer quantity. Here,
not beside the arithmetic it bounds (`autoscaler.policies.recommendation`): the policy's own limits on
min/max_replicas name it, and `serve`'s flags are built without loading the recommendation's modules."""


@dataclass(frozen=True, slots=True)
class RuntimePolicy:
    skew_order: float = 2.0
    """Order p of the power mean over pods. 1 is the plain mean; 2 weighs hot pods by sqrt(mean² + var)."""

    target_gpu_busy: float = 0.8
    """GPU busy ratio (0..1) one pod should run at; 0.8 leaves headroom for bursts before queues form."""

    target_rps_per_pod: float | None = None
    """Requests per second one pod serves well; None: the request rate makes no proposal (models differ)."""

    target_queue_delay_s: float = 0.05
    """Mean queue delay (seconds) above which a pod counts as saturated and queued work asks for pods."""

    queue_drain_s: float = 60.0
    """Seconds in which queued work should drain; backlog in pod-seconds / this = extra pods wanted. 60, not
    15: queued requests stay on their pod, and a burst on one model waits for ModelMesh's copies rather than
    for pods, so faster draining bought few delays for many pod-hours (README, Simulator)."""

    target_lru_age_s: float = 600.0
    """Models used within this many seconds should stay cached; evicting younger ones is cache pressure."""

    cache_full_ratio: float = 0.9
    """A pod whose cache use is below this ratio has room, so the runtime has no cache pressure."""

    cache_pressure_cap: float = 1.2
    """Upper bound of the cache term: cache pressure is all-or-nothing and must not run away."""

    scale_down_tau_s: float = 300.0
    """Time constant (seconds) of the exponential fall of served values; rises are served at once."""

    min_replicas: int | None = None
    """The recommendation never goes below this; None: the minReplicas of the runtime's HPA, else 1."""

    max_replicas: int | None = None
    """The recommendation (and its smoothing state) never goes above this; None: the maxReplicas of the
    runtime's HPA, read from the cluster, else no cap. A value the HPA would cut anyway is never served."""

    max_staleness_s: float = 45.0
    """A pod whose newest sample is older than this is missing (default 3 x the 15 s refresh interval)."""

    min_coverage: float = 0.5
    """Fraction of Ready pods that must have fresh data, else the value is unknown and the API answers 503."""

    warmup_grace_s: float | None = None
    """Seconds a runtime the adapter has no memory of (it just started, or the runtime is new) waits for every
    Ready pod to be fresh before its recommendation is served anyway, never below the current replicas (each
    other value only once every Ready pod has its signal fresh);
    None: `max_staleness_s` (a pod not fresh by then would count as stale with memory too). See `warmup`."""

    need_weight_requests: float = 0.5
    """Weight of a pod's request share (r_i / max r) in its need, for choosing the pod to remove (docs/design.md)."""

    need_weight_gpu: float = 0.5
    """Weight of a pod's GPU busy ratio in its need (docs/design.md, Choosing the pod to remove)."""

    need_weight_cache: float = 2.0
    """Weight of a pod's cache fill (ModelMesh's used / capacity) in its need: keeps the pods that hold models."""

    need_weight_unique: float = 1.0
    """Weight of a pod's unique copies (models only it served in the last `target_lru_age_s`, over the most any
    Ready pod holds) in its need; the term drops out on runtimes whose exporters report no per-model use."""


def lower_bound(policy: RuntimePolicy) -> int:
    """The replica floor: `min_replicas`, else 1 (the HPA's `minReplicas` is merged in by `with_hpa_bounds`)."""
    return policy.min_replicas if policy.min_replicas is not None else 1


@functools.lru_cache(maxsize=65_536)
def with_hpa_bounds(policy: RuntimePolicy, hpa_min: int | None, hpa_max: int | None) -> RuntimePolicy:
    """The policy with the HPA's `minReplicas`/`maxReplicas` filling bounds the config leaves unset (docs/design.md,
    Bounds).

    The config (or annotation) wins where it sets a bound. An HPA bound that contradicts a configured one (the
    HPA's max below the configured min, its min above the configured max) is dropped: the operator's explicit
    setting stands, and the bounds are never crossed (`hpa_contradiction` says why, for the warning).

    Cached (a pure function of immutable values, called for every runtime on every refresh, and `replace`
    costs more than the lookup): one entry per runtime of a 65,536-runtime fleet, under 1 KiB each.
    """
    low = policy.min_replicas if policy.min_replicas is not None else hpa_min
    high = policy.max_replicas if policy.max_replicas is not None else hpa_max
    if low is not None and (low < 1 or (policy.max_replicas is not None and low > policy.max_replicas)):
        low = policy.min_replicas
    if high is not None and high < (low if low is not None else 1):
        high = policy.max_replicas
    if (low, high) == (policy.min_replicas, policy.max_replicas):
        return policy
    return replace(policy, min_replicas=low, max_replicas=high)


def hpa_contradiction(policy: RuntimePolicy, hpa_min: int | None, hpa_max: int | None) -> tuple[str, str] | None:
    """(configured key, the HPA's field) where a bound the config sets lies outside the HPA's bounds, or None.

    The HPA still clamps the replicas it sets to its own bounds, so the config's bound cannot act there: a
    `max_replicas` below `minReplicas` is never reached down to, a `min_replicas` above `maxReplicas` never up
    to. Said, since the adapter alone serves what the config asks (`with_hpa_bounds`)."""
    if policy.max_replicas is not None and hpa_min is not None and policy.max_replicas < hpa_min:
        return "max_replicas", "minReplicas"
    if policy.min_replicas is not None and hpa_max is not None and policy.min_replicas > hpa_max:
        return "min_replicas", "maxReplicas"
    return None
