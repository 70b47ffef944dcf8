"""Ready pods beyond the Deployment's replicas that serve nothing are a rollout's surge, not capacity: left out.

The power mean grows like `n^(1-1/p)` as idle pods are added (docs/design.md, Aggregation): in steady state that
is right, idle pods being how ModelMesh spreads load, and pods at 330, 0, 0 and 0 req/s still ask for about 7.
But a rolling update (or a drain's replacement pods) makes Ready pods the HPA never asked for: the Deployment's
`maxSurge` pods come up Ready at 0 req/s before the old ones go. Counted, they raised the replica count of every
rollout: 4 pods at 90 req/s with 100 a pod serve 4 replicas; 3 surge pods Ready and idle made the request load
476 and 5 replicas, which the slow fall then held for about 12 minutes after the rollout, and the bridge wrote
into `ServingRuntime.spec.replicas` mid-rollout. So where more pods are Ready than the Deployment's
`spec.replicas` (`RuntimeSnapshot.replicas`), up to that many pods that carry no load (no request rate or 0, GPU
idle or unread) are left out of the values, the newest first: they hold no load, so no load leaves the values,
and the runtime's n is what it has once the rollout is over. With Ready pods at most the replicas, nothing
changes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Final

from autoscaler.model import PodSample

NO_SURGE: Final[tuple[str, ...]] = ()
"""No pod left out as surge (the usual case: one tuple for every runtime)."""


def _carries_no_load(pod: PodSample) -> bool:
    """No request rate or 0, and no GPU busy or 0: leaving the pod out takes no load from the values."""
    rps, busy = pod.requests_per_second, pod.gpu_busy
    return (rps is None or rps == 0.0) and (busy is None or busy == 0.0)


def _newest_first(indexed: tuple[int, PodSample]) -> tuple[float, int]:
    """Sort key: the latest creation first; a pod whose creation is unknown counts as newest (a pod not read yet
    is most often the one just started), and among equals the one listed last."""
    index, pod = indexed
    created = pod.created_at
    return (-created if created is not None else -float("inf"), -index)


def surge_pods(pods: Sequence[PodSample], ready: int, replicas: int | None) -> tuple[str, ...]:
    """The names of the Ready pods to leave out as a rollout's surge: at most `ready - replicas` of the pods that
    are Ready and carry no load, the newest first. None where `replicas` is unknown or not below `ready`, or 0: a
    Deployment at 0 has no rollout, and its last pods going are scale-to-zero's (`RuntimeView.scaled_to_zero`)."""
    if replicas is None or ready <= replicas or replicas < 1:
        return NO_SURGE
    idle = [(i, pod) for i, pod in enumerate(pods) if pod.ready and _carries_no_load(pod)]
    if not idle:
        return NO_SURGE
    idle.sort(key=_newest_first)
    return tuple(pod.name for _, pod in idle[:ready - replicas])


def counted_as_surge(pods: Sequence[PodSample], surge: Collection[str]) -> tuple[PodSample, ...]:
    """`pods` with the `surge` ones (by name) not Ready, so that neither the values nor the terms' n count them.
    Not Ready without `unready_since`, they are not held as missing data either (`unready_pods`)."""
    return tuple(replace(pod, ready=False, unready_since=None) if pod.name in surge else pod for pod in pods)


def surge_words(surge: Sequence[str], ready: int, replicas: int) -> str:
    """Why the values leave out these pods, for /debug's reason."""
    return (f"left out as surge: {', '.join(surge)} ({ready} Ready pods, the Deployment's replicas {replicas}; "
            f"Ready beyond the replicas and serving nothing, as a rollout's new pods are)")


def surge_pod_words(ready: int, replicas: int) -> str:
    """Why the values leave out one surge pod, for its own `reason` in /debug's `pods`, where it shows `ready: true`
    and `counted: false`: the pod list showed 7 pods Ready beside `ready_pods` 4, and no pod said which 3 were not
    counted."""
    return (f"left out as surge: Ready beyond the Deployment's replicas {replicas} ({ready} Ready pods) and serving "
            f"nothing, as a rollout's new pods are; not counted in `ready_pods`, the values or any term's n")
