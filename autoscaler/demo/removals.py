"""What the demo's HPA line says of each pod a scale-down removed, and why the ReplicaSet took it.

Why its own words for a pod the adapter has not ranked: the demo reads each pod's deletion cost from the adapter's
/debug, and a pod missing there was removed as cost 0, as a real ReplicaSet reads a pod without the annotation. The
order is right, but "removed demo-5 (deletion cost 0)" read as if the adapter had ranked demo-5 the least needed,
when it had not ranked it at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.demo.fleet import DemoPod
from autoscaler.log_lists import in_words
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove

Ranking = Mapping[str, tuple[int, int | None]]
"""Each pod the adapter ranks: its deletion cost and the models only it served (None: not reported), from /debug."""

NOT_READY = "still starting: a pod not Ready is the first a scale-down removes"
NOT_RANKED = "not ranked yet: no deletion cost, read as 0 as the ReplicaSet does"


def why_removed(pod: ReplicaPod, ranked: Ranking, kept: Iterable[ReplicaPod] = (),
                shown: Mapping[str, int] | None = None) -> str:
    """One removed pod as the HPA line names it: with the adapter's deletion cost where it ranked the pod (the cost
    the ReplicaSet went by, as written at this scale-down), why that made it the least needed against the pods
    `kept`, and what removing it costs (its models only it served). `shown`: the costs the last table showed; a
    cost that moved since is said with the one shown ("deletion cost 600, three seconds after the table showed
    500" read as a mistake). Else what the ReplicaSet went by instead."""
    if not pod.ready:
        return f"{pod.name} ({NOT_READY})"
    if pod.name not in ranked:
        return f"{pod.name} ({NOT_RANKED})"
    cost, unique = ranked[pod.name]
    moved = ""
    if shown is not None and pod.name in shown and shown[pod.name] != cost:
        moved = f", {shown[pod.name]} in the last table: the adapter ranks at every refresh, as the load moves"
    return f"{pod.name} (deletion cost {cost} as written now{moved}, {_lowest(pod, kept)}){_what_it_held(unique)}"


def _lowest(pod: ReplicaPod, kept: Iterable[ReplicaPod]) -> str:
    """Why the ReplicaSet took `pod` before the Ready pods `kept`: the lowest cost, or as low as some, the newest."""
    others = sorted((p for p in kept if p.ready), key=lambda p: (p.deletion_cost, p.name))
    if not others:
        return "the lowest"
    tied = [p.name for p in others if p.deletion_cost == pod.deletion_cost]
    if tied:
        return f"the lowest, tied with {in_words(tied)}: of equal costs the newest goes first"
    return f"the lowest; the next is {others[0].name} at {others[0].deletion_cost}"


def _what_it_held(unique: int | None) -> str:
    """What the pod's removal costs, by the models only it served: the term that weighs most in its cost."""
    if unique is None:
        return ""
    if unique == 0:
        return ": 0 models only it served, each of its models has a copy on a pod kept, which takes its requests"
    return (f": {unique} model{'' if unique == 1 else 's'} only it served, the next request for each a cold load "
            f"on a pod kept")


def scale_down(pods: Iterable[DemoPod], ranked: Ranking, count: int,
               shown: Mapping[str, int] | None = None) -> list[tuple[str, str]]:
    """(name, what the HPA line says of it) of each pod a scale-down by `count` removes, in the ReplicaSet's order:
    not Ready first, then the lowest deletion cost (0 for a pod the adapter has not ranked), then the newest."""
    view = [ReplicaPod(p.name, p.ready, ranked[p.name][0] if p.name in ranked else 0, p.created_at) for p in pods]
    gone = pods_to_remove(view, count)
    kept = [p for p in view if p not in gone and p.name in ranked]
    return [(pod.name, why_removed(pod, ranked, kept, shown)) for pod in gone]
