"""ModelMesh's pre-shutdown in the simulated runtime: the copies a scale-down sends of the removed pods' models to
the pods that stay (`migrate`), and the loads the requests of a model wait for meanwhile (`AwaitedLoad`, also a
cold load's), which `cluster.Cluster` counts as delayed.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.simulation.copies import ModelCopies
from autoscaler.simulation.loading import Load
from autoscaler.simulation.placement import choose_pod
from autoscaler.simulation.pods import ClusterShape, SimPod

__all__ = ["AwaitedLoad", "migrate"]


@dataclass(slots=True)
class AwaitedLoad:
    """A load the requests for its model wait for: a cold load, or the copy a pre-shutdown asked for of a model
    whose only copies left.

    ModelMesh's pre-shutdown removes each cache entry of the leaving pod (`ce.remove()`) before it asks for a
    copy elsewhere, so nothing serves the model until that copy loads. The copy is in `pod`'s cache at once and
    takes the model's requests; they count delayed from the routing that finds it loading until its load is
    done (`load.ready_at`, as the pod's loading queue has it then), at each routing's rates, on into the next
    bucket when the wait outlasts this one, `counted_until` marking how far they were counted and `rate` at
    what rate last. A load that ends sooner than counted (one before it stopped), or a copy evicted while it
    loads, gives back the requests counted past that (they are served, or wait where they go)."""

    pod: SimPod
    load: Load
    counted_until: float
    rate: float = 0.0


def migrate(leaving: list[tuple[float, int]], ready: list[SimPod], copies: ModelCopies, shape: ClusterShape,
            now: float, lost: set[int], awaited: dict[int, AwaitedLoad]) -> int:
    """Copy every model the removed pods held to a remaining pod that neither holds nor loads it, most
    recently used first, keeping its age.

    ModelMesh's pre-shutdown (ModelMesh.java `preShutdown`) goes over the leaving pod's cache, most
    recently used first ("loop over local cache most recently used to least recent"), and asks for a copy
    of each model elsewhere, `triggerNewModelCopyElsewhere(modelId, mr, lruTime, ce.getWeight())`, which
    excludes every instance the model record lists, loaded or loading ("toExclude.addAll(current)"; only
    this instance when it is the only one): a model held elsewhere gets a new copy too, on a pod without
    one. It then keeps serving until the models used in the last hour have loaded somewhere other than
    itself, within the termination grace period (90 s in config/base/deployment.yaml), and deregisters.
    The janitor later unloads the copies that turn out to be extra (janitor.py). A model several leaving
    pods held gets one copy: their pre-shutdowns exclude the same holders, and the second request finds
    the first one's copy loading on a pod it did not exclude.

    Without a Ready pod left the models nobody else holds are lost, and so are those every pod refuses (the
    churn limit, placement.py) and those a full pod drops at once because their last use is older than its
    own oldest copy (the load "immediately evicted" in ModelMesh's cache-miss path: a move never displaces
    a copy used more recently); a model held elsewhere keeps its copies there.

    Each pod loads the copies sent to it `load_concurrency` at a time (its loading queue orders them by
    last use, most recent first; loading.py): a model whose only copies left is served by none until its copy
    loads (`AwaitedLoad`, added to `awaited`), whose load goes ahead once a request for it arrives; a model with
    loaded copies elsewhere is served by those. Placed at once, each copy fills its pod's cache for the
    placements after it, as ModelMesh's cache entry does from the load's start.

    Simplification: the leaving pod's other loads under way stop with it. A cold load among them (its model
    in the leaving cache from the load's start) stays one cold load: its model is copied here as any other, a
    move, not a second cold load; only a model no pod takes is loaded cold again by its next request
    (`cold_loads_after_removal`; such models are added to `lost`). The loads no thread took are counted apart
    (loading.LoadWaits). Returns how many copies it sent (`Cluster.migrated_loads`)."""
    capacity = shape.cache_models
    migrated = 0
    for used, model in sorted(leaving, reverse=True):
        held = copies.holders.get(model)
        taken = {p.name for p in held} if held else set()
        taken |= copies.loading_on(model)
        pods = [p for p in ready if p.name not in taken] if taken else ready
        target = choose_pod(pods, capacity, now, now - used, shape.min_churn_age_s) if pods else None
        if target is None or (len(target.cache) >= capacity and used < next(iter(target.cache.values()))):
            if not held:
                lost.add(model)
            continue
        copies.load(target, model, now, used)
        migrated += 1
        load = target.loading.add(model, now, used)
        if not held:
            awaited[model] = AwaitedLoad(target, load, now)
    for _, model in leaving:  # the leaving pods deregister their copies
        copies.unloaded(model, now)
    return migrated
