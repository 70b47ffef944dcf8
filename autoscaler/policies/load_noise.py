"""How far apart ordinary load noise can put the needs of two pods that serve alike: the slack under which a
changed ranking is noise, and over which it has clearly turned (`autoscaler.ranking_hold` hurries the writes of a
turn that comes after `modelmesh_desired_replicas` fell).

Why from the policy's weights: the load terms (request share, GPU busy) move with every refresh's noise, the
cache fill and the unique copies hardly. Where request share is the only term (`need_weight_cache: 0` on a runtime
without GPUs or per-model use) it spans the whole need, and pods at 30 and 70 req/s stand more than half of it
apart from one refresh to the next; under the default weights it is a fifth of the need. One slack for every
policy either took noise for turns or missed real ones.

Why in need, not in cost buckets: a bucket's rounding adds up to a bucket of its own. Under the default weights
a reviewer's turn (all the load moved onto one pod: a fifth of the need) and 30-70 req/s noise (a ninth) both
came out two buckets apart, and judged by buckets the noise of 20 pods sent half again as many PATCHes.
"""

from __future__ import annotations

from typing import Final

from autoscaler.model import RuntimeView
from autoscaler.policies.policy import RuntimePolicy

LOAD_NOISE: Final = 2 / 3
"""How far ordinary noise moves a load term (0..1) between two pods that serve alike: pods at 25 and 75 req/s
(50 +- 50%) stand two thirds of the busier one's rate apart."""


def load_noise_need(policy: RuntimePolicy, view: RuntimeView) -> float:
    """The need (0..1) by which two pods of `view` may stand apart through load noise alone: the load terms' share
    of the weights the runtime's Ready pods report (a term none reports drops out of the need, as in the ranking,
    `autoscaler.policies.ranking`), times `LOAD_NOISE`."""
    ready = [pod for pod in view.pods if pod.ready]
    reported = {
        "requests": (policy.need_weight_requests, any(pod.requests_per_second is not None for pod in ready)),
        "gpu": (policy.need_weight_gpu, any(pod.gpu_busy is not None for pod in ready)),
        "cache": (policy.need_weight_cache, any(pod.cache_used_ratio is not None for pod in ready)),
        "unique": (policy.need_weight_unique, any(pod.unique_models is not None for pod in ready)),
    }
    weights = {term: weight for term, (weight, seen) in reported.items() if seen and weight > 0.0}
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return (weights.get("requests", 0.0) + weights.get("gpu", 0.0)) / total * LOAD_NOISE
