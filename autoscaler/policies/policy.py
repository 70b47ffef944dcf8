"""Per-runtime scaling policy: the targets and limits of docs/configuration.md (Policy), one typed field each.

Defaults here are the built-in defaults docs/configuration.md lists. A config file (`--config`) replaces them for all or
some runtimes, and `autoscaler.modelmesh.io/<key-with-dashes>` annotations on a runtime's Deployment
override single fields (see `autoscaler.policies.config`).
"""

from __future__ import annotations

from dataclasses import dataclass


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

    queue_drain_s: float = 15.0
    """Seconds in which queued work should drain; backlog in pod-seconds / this = extra pods wanted."""

    target_lru_age_s: float = 600.0
    """Models used within this many seconds should stay cached; evicting younger ones is cache pressure."""

    cache_full_ratio: float = 0.9
    """A pod whose cache use is below this ratio has room, so the runtime has no cache pressure."""

    cache_pressure_cap: float = 1.2
    """Upper bound of the cache term: cache pressure is all-or-nothing and must not run away."""

    scale_down_tau_s: float = 300.0
    """Time constant (seconds) of the exponential fall of served values; rises are served at once."""

    min_replicas: int = 1
    """The recommendation never goes below this."""

    max_replicas: int | None = None
    """The recommendation never goes above this; None: no cap besides the HPA's own maxReplicas."""

    max_staleness_s: float = 45.0
    """A pod whose newest sample is older than this is missing (default 3 x the 15 s refresh interval)."""

    min_coverage: float = 0.5
    """Fraction of Ready pods that must have fresh data, else the value is unknown and the API answers 503."""

    need_weight_requests: float = 0.5
    """Weight of a pod's request share (r_i / max r) in its need, for choosing the pod to remove (docs/design.md)."""

    need_weight_gpu: float = 0.5
    """Weight of a pod's GPU busy ratio in its need (docs/design.md, Choosing the pod to remove)."""
