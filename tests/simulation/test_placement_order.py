"""The placement choice without a sort is the one the sort gave: the same pod, ties included, on any pods.

`choose_pod` sorted every pod in ModelMesh's `PLACEMENT_ORDER` for every load; it now finds the shortlist and
its first not-too-busy pod in one pass. `sorted_choice` is the sorting version as it was (kept here as the
reference), and the property runs both on random pod states: caches of any size around the capacity, shared
LRU times, equal rates and equal names (so ties reach every field of the order), any last use.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.placement import _FIVE_DAYS_S, _MIN_RPM, busier_factor, choose_pod


@dataclass(eq=False)
class Pod:
    """Compared by identity: the property asks for the same pod, not an equal one."""

    name: str
    cache: OrderedDict[int, float]
    rate: float


def sorted_choice(pods: list[Pod], capacity: int, now: float, last_used_ago_s: float) -> Pod | None:
    """`choose_pod` before it stopped sorting, line for line."""

    def oldest(pod: Pod) -> float:
        return next(iter(pod.cache.values())) if pod.cache else math.inf

    def key(pod: Pod) -> tuple[bool, float, int, float, float, str]:
        full = len(pod.cache) >= capacity
        return full, oldest(pod) if full else 0.0, len(pod.cache), 0.0 if full else oldest(pod), pod.rate, pod.name

    ordered = sorted(pods, key=key)
    if not ordered:
        return None
    best = ordered[0]
    best_full = len(best.cache) >= capacity
    best_free, best_count, best_lru = capacity - len(best.cache), len(best.cache), oldest(best)
    shortlist = [best]
    for pod in ordered[1:]:
        if best_full:
            diff = oldest(pod) - best_lru
            if diff > 45.0 and diff > (now - best_lru) / 10.0:
                break
        else:
            free, count = capacity - len(pod.cache), len(pod.cache)
            if free <= 0 or free < best_free >> 2:
                break
            if count >= 10 and count > best_count + (best_count >> 2):
                break
        shortlist.append(pod)
    if len(shortlist) == 1 or last_used_ago_s >= _FIVE_DAYS_S:
        return shortlist[0]
    factor = busier_factor(last_used_ago_s)
    floor = max(_MIN_RPM, min(p.rate for p in shortlist) * 60.0)
    for pod in shortlist:
        rpm = pod.rate * 60.0
        if rpm < _MIN_RPM or rpm <= factor * floor:
            return pod
    return shortlist[0]


NOW = 100_000.0


@st.composite
def pod_states(draw: st.DrawFn) -> tuple[list[Pod], int]:
    capacity = draw(st.integers(0, 30))
    # few distinct values, so that counts, LRU times, rates and names tie often
    lru = st.one_of(st.sampled_from([0.0, 10.0, 50.0, NOW - 3000.0, NOW - 40.0, NOW]), st.floats(0.0, NOW))
    rate = st.one_of(st.sampled_from([0.0, 1.0, 1.5, 2.0, 5.0, 100.0]), st.floats(0.0, 500.0))
    all_full = draw(st.booleans())
    pods = []
    for i in range(draw(st.integers(0, 12))):
        size = draw(st.one_of(st.sampled_from([0, max(0, capacity - 1), capacity, capacity + 1]),
                              st.integers(0, capacity + 2)))
        size = max(size, capacity) if all_full else size  # half the states: no room, the order by LRU age
        first = draw(lru)
        cache = OrderedDict((m, first + m) for m in range(size))  # least recent first, as a pod keeps it
        pods.append(Pod(draw(st.sampled_from(["a", "b", f"p{i}"])), cache, draw(rate)))
    return pods, capacity


LAST_USES = st.one_of(st.sampled_from([-10.0, 0.0, 4.9, 5.0, 60.0, 12 * 60.0, 86_400.0, _FIVE_DAYS_S]),
                      st.floats(-100.0, 2 * _FIVE_DAYS_S))


@settings(max_examples=400)
@given(pod_states(), LAST_USES)
def test_the_choice_is_the_sorted_choice_ties_included(state: tuple[list[Pod], int], last_used_ago_s: float) -> None:
    pods, capacity = state
    assert choose_pod(pods, capacity, NOW, last_used_ago_s) is sorted_choice(pods, capacity, NOW, last_used_ago_s)


@given(pod_states(), LAST_USES)
def test_any_iterable_of_pods_gives_the_same_choice(state: tuple[list[Pod], int], last_used_ago_s: float) -> None:
    pods, capacity = state
    assert choose_pod(iter(pods), capacity, NOW, last_used_ago_s) is choose_pod(pods, capacity, NOW,
                                                                                  last_used_ago_s)
