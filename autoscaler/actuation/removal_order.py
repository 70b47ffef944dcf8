"""Which pods the ReplicaSet would remove now that this refresh's ranking does not count among the least needed:
what a scale-down waits on (`autoscaler.ranking_hold`). Pure, so the rule can be read and tested apart from the
writer that knows the costs.

Why the order and not the values: the ReplicaSet removes not-Ready pods first, then the lowest
`controller.kubernetes.io/pod-deletion-cost`. A cost a bucket off, or a changed cost the writer puts off for its
per-pod minute, harms nothing while the pods that go are still among the least needed. Waiting for every value held
scale-downs under ordinary load noise until the hold's cap, with nothing refused.

Ties: pods with the same carried cost may go in any order, so each of them counts as one that may go; pods with the
same ranked cost (one of the writer's buckets) are equally needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PodCosts:
    """One pod of a runtime as the check sees it."""

    name: str
    ready: bool
    ranked: float | None
    """How much this refresh's ranking needs it: the cost it gives it, or its need (0..1) where a bucket's
    rounding would blur a judgement (None: not ranked, e.g. its data is stale: its need is unknown)."""
    carried: int
    """The cost the pod carries in the cluster, as the ReplicaSet reads it (none, or not a number: 0)."""


def carried_cost(annotation: str | None) -> int:
    """The cost the ReplicaSet reads from an annotation: an absent or unparseable one counts as 0."""
    try:
        return int(annotation) if annotation is not None else 0
    except ValueError:
        return 0


def misplaced_removals(pods: Iterable[PodCosts], removing: int, slack: float = 0) -> list[str]:
    """The pods that the ReplicaSet may remove when it removes `removing` of `pods` while a pod the ranking needs
    less (by more than `slack`, in `ranked`'s unit: how far two rankings of the same load may disagree) may stay;
    empty when every choice it may make removes least-needed pods. A pod not ranked counts as least needed: with
    no data on it nothing says it is needed."""
    may_go, may_stay = _replicaset_choices(pods, removing)
    if not may_stay:
        return []
    least_needed_staying = min(_need(pod) for pod in may_stay)
    return [pod.name for pod in may_go if _need(pod) > least_needed_staying + slack]


def turned_removals(pods: Iterable[PodCosts], removing: int, slack: float = 0) -> list[str]:
    """As `misplaced_removals`, judged among ranked pods only: the ranked pods the ReplicaSet may remove while a
    ranked pod needed less (by more than `slack`) may stay. What a turn of the ranking is (`hurry_turned`): a pod
    not ranked (its exporter's scrape fails) has no need to turn from, and the writer leaves its cost as it is.
    Counted as least needed, a Ready pod whose scrape failed made every fresh pod look misplaced beside it, and
    its runtime's writes were hurried at every refresh while the scrape failed."""
    may_go, may_stay = _replicaset_choices(pods, removing)
    staying = [pod.ranked for pod in may_stay if pod.ranked is not None]
    if not staying:
        return []
    return [pod.name for pod in may_go if pod.ranked is not None and pod.ranked > min(staying) + slack]


def _need(pod: PodCosts) -> float:
    """Its ranked need, a pod not ranked below every ranked one."""
    return pod.ranked if pod.ranked is not None else -1


def _replicaset_choices(pods: Iterable[PodCosts], removing: int) -> tuple[list[PodCosts], list[PodCosts]]:
    """The Ready pods the ReplicaSet may remove when it removes `removing` of `pods`, and those that may stay
    (both empty when it removes no Ready pod, or all of them: no choice to get wrong)."""
    pods = list(pods)
    removing -= sum(1 for pod in pods if not pod.ready)  # the ReplicaSet removes these first, whatever their costs
    ready = [pod for pod in pods if pod.ready]
    if removing <= 0 or removing >= len(ready):
        return [], []
    last_removed = sorted(pod.carried for pod in ready)[removing - 1]
    tied = [pod for pod in ready if pod.carried == last_removed]
    surely_removed = sum(1 for pod in ready if pod.carried < last_removed)
    may_go = [pod for pod in ready if pod.carried <= last_removed]
    # A pod tied with the last one removed may stay too, unless the ReplicaSet removes all of them.
    may_stay = [pod for pod in ready if pod.carried > last_removed or
                (pod.carried == last_removed and surely_removed + len(tied) > removing)]
    return may_go, may_stay
