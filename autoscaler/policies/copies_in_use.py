"""The cache need's count of model copies in use (docs/design.md, Recommendation): how many copies the Ready pods
with fresh load data served within `target_lru_age_s`, two of a model at most (`COUNTED_COPIES`).

Apart from the aggregation, whose job is the runtime values of the per-pod signals: `aggregation.scan_pods`
counts the copies here (`models_in_use`) unless `podviews.examine_pods` reads them off the unique-copy term's
count of the same models (`counted_copies`, `fresh_models_in_use`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from autoscaler.model import PodSample


def fresh_models_in_use(servers: Mapping[str, int], pods: Sequence[PodSample], fresh: Sequence[bool],
                        since: float) -> int:
    """How many copies the Ready pods with fresh load data (`fresh`, `Aggregate.fresh`) served at or after
    `since`, at most COUNTED_COPIES of a model, from `servers`: how many Ready pods served each model then (the
    unique-copy term's count). The copies stale pods served are taken off, so this reads the stale pods' models
    alone (few)."""
    stale: dict[str, int] = {}
    for pod, ok in zip(pods, fresh, strict=True):
        if pod.ready and not ok and (m := pod.recent_models):
            for model, at in m.items():
                if at >= since:
                    stale[model] = stale.get(model, 0) + 1
    total = counted_copies(servers)
    for model, gone in stale.items():  # the few models stale pods served: what their copies took off the count
        n = servers.get(model, 0)
        total -= min(COUNTED_COPIES, n) - min(COUNTED_COPIES, max(0, n - gone))
    return total


def models_in_use(used: list[Mapping[str, float]], since: float) -> int:
    """How many copies the pods served at or after `since` (a model on two pods counts twice, on more pods
    COUNTED_COPIES times): each pod's in-window models counted, as `ranking.UniqueCopyTerm.counts` reads them.

    Copies, not distinct models: a scale-down's pre-shutdown asks for a copy of every model the leaving pod
    holds on a pod without one (extra copies of busy models too), so what the pods that stay must hold is the
    copies; counted as distinct models, a runtime whose busy models have two copies each scaled to half the
    pods its copies in use fill, and the moves evicted copies still in use (docs/simulation.md)."""
    servers: dict[str, int] = {}
    for models in used:
        for model, at in models.items():
            if at >= since:
                servers[model] = servers.get(model, 0) + 1
    return counted_copies(servers)


COUNTED_COPIES: Final = 2
"""The copies of one model the cache need counts: ModelMesh keeps a second copy while a model is used, and its
janitor unloads a third that is no longer busy (removeModelCopies), so copies past the second follow the load
(the GPU and request terms' to size). Counted all, pods added for a busy model's load filled with its copies and
asked for themselves again: a runtime of one model a pod never scaled down."""


def counted_copies(servers: Mapping[str, int]) -> int:
    """The copies in use the cache need counts, from how many pods (1 or more) served each model: two of a model
    at most (COUNTED_COPIES), so each model counts two but those on one pod. Counted by `list.count`, a loop in
    C: a loop over the models in Python added a tenth to a refresh of 10,000 pods reporting 50 models each."""
    return 2 * len(servers) - list(servers.values()).count(1)  # sum(min(n, 2)): COUNTED_COPIES is 2
