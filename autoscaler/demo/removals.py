"""What the demo's HPA line says of each pod a scale-down removed, and why the ReplicaSet took it.

Why its own words for a pod the adapter has not ranked: the demo reads each pod's deletion cost from the adapter's
/debug, and a pod missing there was removed as cost 0, as a real ReplicaSet reads a pod without the annotation. The
order is right, but "removed demo-5 (deletion cost 0)" read as if the adapter had ranked demo-5 the least needed,
when it had not ranked it at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.demo.fleet import DemoPod
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove

Ranking = Mapping[str, tuple[int, int | None]]
"""Each pod the adapter ranks: its deletion cost and the models only it served (None: not reported), from /debug."""

NOT_READY = "still starting: a pod not Ready is the first a scale-down removes"
NOT_RANKED = "not ranked yet: no deletion cost, read as 0 as the ReplicaSet does"


def why_removed(pod: ReplicaPod, ranked: Ranking) -> str:
    """One removed pod as the HPA line names it: with the adapter's deletion cost where it ranked the pod, else
    what the ReplicaSet went by instead."""
    if not pod.ready:
        return f"{pod.name} ({NOT_READY})"
    if pod.name not in ranked:
        return f"{pod.name} ({NOT_RANKED})"
    cost, unique = ranked[pod.name]
    alone = "" if unique is None else f", {unique} model{'' if unique == 1 else 's'} only it served"
    return f"{pod.name} (deletion cost {cost}{alone})"



def scale_down(pods: Iterable[DemoPod], ranked: Ranking, count: int) -> list[tuple[str, str]]:
    """(name, what the HPA line says of it) of each pod a scale-down by `count` removes, in the ReplicaSet's order:
    not Ready first, then the lowest deletion cost (0 for a pod the adapter has not ranked), then the newest."""
    view = [ReplicaPod(p.name, p.ready, ranked[p.name][0] if p.name in ranked else 0, p.created_at) for p in pods]
    return [(gone.name, why_removed(gone, ranked)) for gone in pods_to_remove(view, count)]
