"""What the demo's HPA line says of each pod a scale-down removed, and why the ReplicaSet took it.

Why its own words for a pod the adapter has not ranked: the demo reads each pod's deletion cost from the adapter's
/debug, and a pod missing there was removed as cost 0, as a real ReplicaSet reads a pod without the annotation. The
order is right, but "removed demo-5 (deletion cost 0)" read as if the adapter had ranked demo-5 the least needed,
when it had not ranked it at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from autoscaler.demo.fleet import DemoPod
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove

Ranking = Mapping[str, tuple[int, int | None]]
"""Each pod the adapter ranks: its deletion cost and the models only it served (None: not reported), from /debug."""

NOT_READY = "still starting: a pod not Ready is the first a scale-down removes"
NOT_RANKED = "not ranked yet: no deletion cost, read as 0 as the ReplicaSet does"


def why_removed(pod: ReplicaPod, ranked: Ranking, kept: Iterable[ReplicaPod] = (),
                shown: Mapping[str, int] | None = None) -> str:
    """One removed pod as the HPA line names it, in one short clause: `demo-7 (cost 400, was 300; lowest, newest of
    4 tied; its models have copies)`. The adapter's deletion cost where it ranked the pod (the cost the ReplicaSet
    went by, as written at this scale-down), and the one the last table showed where it moved since (`shown`: a
    cost three seconds after the table showed another read as a mistake); why that made it the least needed
    against the Ready pods the ReplicaSet chose among (`kept`); and what removing it costs (its models only it
    served). Else what the ReplicaSet went by instead. Each clause used to run to 530 characters."""
    if not pod.ready:
        return f"{pod.name} ({NOT_READY})"
    if pod.name not in ranked:
        return f"{pod.name} ({NOT_RANKED})"
    cost, unique = ranked[pod.name]
    was = f", was {shown[pod.name]}" if shown is not None and shown.get(pod.name, cost) != cost else ""
    return f"{pod.name} (cost {cost}{was}; {_lowest(pod, kept)}{_what_it_held(unique)})"


def _lowest(pod: ReplicaPod, kept: Iterable[ReplicaPod]) -> str:
    """Why the ReplicaSet took `pod` before the Ready pods `kept`: the lowest cost, or as low as some, the newest."""
    others = sorted((p for p in kept if p.ready), key=lambda p: (p.deletion_cost, p.name))
    if not others:
        return "lowest"
    tied = [p for p in others if p.deletion_cost == pod.deletion_cost]
    if tied:
        return f"lowest, newest of {len(tied) + 1} tied"
    return f"lowest, next {others[0].name} at {others[0].deletion_cost}"


def _what_it_held(unique: int | None) -> str:
    """What the pod's removal costs, by the models only it served: the term that weighs most in its cost."""
    if unique is None:
        return ""
    if unique == 0:
        return "; its models have copies"
    return f"; {unique} model{'' if unique == 1 else 's'} only it served"


def scale_down(pods: Iterable[DemoPod], ranked: Ranking, count: int,
               shown: Mapping[str, int] | None = None) -> list[tuple[str, str]]:
    """(name, what the HPA line says of it) of each pod a scale-down by `count` removes, in the ReplicaSet's order:
    not Ready first, then the lowest deletion cost (0 for a pod the adapter has not ranked), then the newest. Each
    is set against the ranked pods it was chosen among: those kept and those removed after it."""
    view = [ReplicaPod(p.name, p.ready, ranked[p.name][0] if p.name in ranked else 0, p.created_at) for p in pods]
    gone = pods_to_remove(view, count)
    kept = [p for p in view if p not in gone and p.name in ranked]
    return [(pod.name, why_removed(pod, ranked, [*kept, *(p for p in gone[index + 1:] if p.name in ranked)], shown))
            for index, pod in enumerate(gone)]


def removal_preview(costs: Mapping[str, int], created: Sequence[str]) -> str | None:
    """The table's line on what a scale-down would take: the pods of the lowest cost first, the newest first as the
    ReplicaSet takes them (`created`: the pods oldest first; listed by name, `demo-0, demo-4, demo-5` read as if
    demo-0 went first), and those of the highest last; None where all cost the same (nothing to tell apart)."""
    if not costs:
        return None
    cheapest, dearest = min(costs.values()), max(costs.values())
    if cheapest == dearest:
        return None
    newest_first = [name for name in reversed(created) if name in costs]
    first = [name for name in newest_first if costs[name] == cheapest]
    last = [name for name in newest_first if costs[name] == dearest]
    tie = ", the newest first" if len(first) > 1 else ""
    return (f"  on scale-down the ReplicaSet removes {', '.join(first)} first (deletion cost {cheapest}{tie}), "
            f"{', '.join(last)} last ({dearest})")
