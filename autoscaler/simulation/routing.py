"""Routing one bucket's request rates over the Ready pods, the way ModelMesh routes requests.

Every model's rate goes to the least busy pods that hold a loaded copy (spread to level them; a copy still
loading takes none while a loaded one exists). A model held nowhere is loaded where ModelMesh's cache-miss
balancer puts it (placement.py) -- a *cold load*, whose requests wait the load time -- evicting that pod's
least recently used copy. A one-copy model used again 7 to 40 minutes after a prior use gets a second copy
while the caches are at least 10% free (regular_use.py), placed as any load: a pod with room takes it
before a full one, however many loads it already has under way (ModelMesh's `PLACEMENT_ORDER` counts loads
in progress only to break ties), until those loads fill it: a new, empty pod collects them, and no full pod
evicts for them while one has room.

While routing, a queue counts as load it would take `BACKLOG_HORIZON_S` to drain: the least busy pod is the
one with the least work ahead, as ModelMesh judges by requests in flight.

A load no pod takes (every pod full, each with a copy used within the minimum churn age: placement.py) is
refused: the model stays unloaded and its requests fail. ModelMesh keeps no record of the refusal, so each
request of the model tries again; the cluster tries the refused models again every tick (`retry`), and the
first request after a pod's oldest copy has aged past the limit loads the model there.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Final

from autoscaler.simulation.copies import ModelCopies
from autoscaler.simulation.fluid import water_fill
from autoscaler.simulation.placement import choose_pod, oldest_copy
from autoscaler.simulation.pods import SimPod, flush_counts
from autoscaler.simulation.rate_check import RATE_CHECK_S
from autoscaler.simulation.regular_use import RegularUse

BACKLOG_HORIZON_S: Final = 10.0


def begin(pods: Sequence[SimPod], ready: Sequence[SimPod]) -> None:
    """Start a routing: every pod's rate is its queued work, no copy has a share yet (the requests counted at
    the shares so far kept for the rate check)."""
    for pod in pods:
        if pod.counting_s:
            flush_counts(pod)
        pod.rate = pod.backlog / BACKLOG_HORIZON_S
    for pod in ready:
        pod.shares = {}


def end(pods: Sequence[SimPod]) -> None:
    """Finish a routing: a pod's rate is the arrivals routed to it, its queued work taken back out."""
    for pod in pods:
        pod.rate = max(0.0, pod.rate - pod.backlog / BACKLOG_HORIZON_S)


def cold_load(copies: ModelCopies, regular: RegularUse, target: SimPod, model: int, rate: float,
              now: float) -> None:
    """Load `model`, held nowhere, on `target`, and route its rate there."""
    if target.counting_s:  # a retry between routings: the shares change
        flush_counts(target)
    copies.load(target, model, now)
    regular.forget(model)  # a fresh cache entry, whose first use is this one
    regular.used(model, now)
    target.rate += rate
    target.shares[model] = rate


def retry(ready: Sequence[SimPod], copies: ModelCopies, regular: RegularUse, now: float,
          refused: dict[int, float]) -> list[tuple[int, float, SimPod]]:
    """Try the loads every pod refused again at `now`, as the models' next requests do; the cold loads that
    went ahead, as `spread` gives them, each model taken out of `refused` (model -> request rate).

    The busiest model first: its next request is the likeliest to come first. Once a load is refused again
    every later one is (no pod aged past the limit, and a load only makes its pod's copies younger)."""
    capacity, churn_age = copies.shape.cache_models, copies.shape.min_churn_age_s
    cold: list[tuple[int, float, SimPod]] = []
    for model, rate in sorted(refused.items(), key=itemgetter(1), reverse=True):
        target = choose_pod(ready, capacity, now, 0.0, churn_age)
        if target is None:
            break
        cold_load(copies, regular, target, model, rate, now)
        cold.append((model, rate, target))
        del refused[model]
    return cold


def spread(ready: Sequence[SimPod], copies: ModelCopies, regular: RegularUse, now: float,
           models: Sequence[int], rates: Sequence[float]) -> tuple[list[tuple[int, float, SimPod]], dict[int, float]]:
    """Route each model's rate (between `begin` and `end`); the cold loads it started, as (model, rate, the
    pod loading it), and the models whose load every pod refused, with their request rates (those requests
    fail until a load goes ahead: `retry`)."""
    capacity = copies.shape.cache_models
    churn_age = copies.shape.min_churn_age_s
    refused: dict[int, float] = {}
    holders_of = copies.holders
    used = regular.used  # bound once: called for most of a bucket's thousands of models
    cold: list[tuple[int, float, SimPod]] = []
    starting: dict[SimPod, int] = {}  # second copies this routing started per pod, not in its cache yet
    # ModelMesh adds a second copy for regular use only while the caches are at least 10% free
    roomy = 10 * sum(capacity - len(p.cache) for p in ready) >= capacity * len(ready)
    # Models with one copy cannot go elsewhere; models with several spread around them. Routing the quiet
    # ones first lets the hot ones fill the gaps, as per-request least-busy routing does. Models already
    # held go before those to load: their requests keep coming all bucket long, so their copies are
    # recently used when a load evicts, and a load takes the LRU copy of a model not asked for.
    # (Partitioned, each part sorted by rate: the stable sort on (not held, rate) it replaces gives the same
    # order, without calling a key function for each of thousands of models every bucket.)
    pairs = list(zip(rates, models, strict=True))
    order = [rm for rm in pairs if rm[1] in holders_of]
    order.sort(key=itemgetter(0))
    to_load = [rm for rm in pairs if rm[1] not in holders_of]
    to_load.sort(key=itemgetter(0))
    order += to_load
    churning = False  # a load every pod refused: so will they the next (no cache changed since)
    # Each pod's oldest copy, for the loads: made at the first, then only the pod that loaded changes (the
    # models to load come last, and a load evicts on its own pod only); placement took it from every pod anew
    oldest: dict[SimPod, float] | None = None
    for rate, model in order:
        holders = holders_of.get(model)
        if holders is None:
            # The models to load come last and only a load changes a cache, so once every pod is full and
            # churning it stays so for the rest of this routing: no need to ask each pod again per model (a
            # day of 5,000 models at 10 pods asked 718,240 times in vain).
            if oldest is None:
                oldest = {pod: oldest_copy(pod) for pod in ready}
            target = None if churning else choose_pod(ready, capacity, now, 0.0, churn_age, oldest)
            if target is None:  # every pod full and churning: ModelMesh fails the request
                churning = True
                refused[model] = rate
                continue
            cold_load(copies, regular, target, model, rate, now)
            oldest[target] = oldest_copy(target)
            cold.append((model, rate, target))
        elif len(holders) == 1:
            pod = holders[0]
            pod.rate += rate
            pod.shares[model] = rate
            cache = pod.cache
            cache[model] = now
            cache.move_to_end(model)
            if rate > 0.0 and used(model, now) and roomy and not copies.loading(model):
                others = [p for p in ready if p is not pod]
                room = [p for p in others if len(p.cache) + starting.get(p, 0) < capacity]
                full = [p for p in others if p not in starting]  # not a pod its loads under way just filled
                spare = choose_pod(room or full or others, capacity, now, RATE_CHECK_S, churn_age)
                if spare is not None:
                    copies.start_copy(model, spare, now, now - RATE_CHECK_S)  # last use: the last check's time
                    starting[spare] = starting.get(spare, 0) + 1
        elif len(holders) == 2:
            route_to_two(holders[0], holders[1], model, rate, now)
        else:
            before = [pod.rate for pod in holders]
            for pod in water_fill(holders, rate):  # only copies that took requests count as used
                pod.cache[model] = now
                pod.cache.move_to_end(model)
            for pod, was in zip(holders, before):  # noqa: B905  # one each by construction; strict= is slower
                if pod.rate > was:
                    pod.shares[model] = pod.rate - was
    return cold, refused


def route_to_two(first: SimPod, second: SimPod, model: int, rate: float, now: float) -> None:
    """Route `model`'s `rate` over its two holders as `spread` does over several: `water_fill` (the less busy
    first, ties to `first`, up to the other's level, then both level), each pod that took some marked used and
    given the share it gained. Written out for two, the most copies most held models have (a day of 200
    models: 676,000 of these a run, where the list, the sort and the loops of the general way cost more than
    the arithmetic); the sums are `water_fill`'s to the bit, in its order, tests/simulation/test_cluster.py
    holds the two to each other."""
    r_first, r_second = first.rate, second.rate
    if r_second < r_first:
        low, r_low, r_high = second, r_second, r_first
    else:
        low, r_low, r_high = first, r_first, r_second
    total = 0.0 + r_low  # water_fill's running total, from 0.0 as it starts
    level = total + rate
    if level <= r_high:  # the less busy one takes it all, up to the other's level at most
        low.rate = level if level > r_low else r_low
        low.cache[model] = now
        low.cache.move_to_end(model)
        if low.rate > r_low:
            low.shares[model] = low.rate - r_low
        return
    level = (total + r_high + rate) / 2
    for pod, was in ((first, r_first), (second, r_second)):
        pod.rate = level if level > was else was
        pod.cache[model] = now
        pod.cache.move_to_end(model)
        if pod.rate > was:
            pod.shares[model] = pod.rate - was
