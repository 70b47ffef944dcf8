"""The review cache's one-lookup read finds exactly what `cachetools.TTLCache` finds, and never an expired entry.

Hypothesis runs random sequences of inserts, deletions, clock steps (onto and past each entry's expiry) and
lookups against a plain `TTLCache` on the same stepped clock: every lookup answers what `TTLCache[key]` answers.
With a small size (evictions), a lookup answers None or the last value inserted, never once its TTL has run,
and the side index holds exactly the `TTLCache`'s keys. The authorizer, on a stepped clock, reviews again at
the very expiry.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cachetools import Cache, TTLCache
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.authz import SubjectAccessReviewAuthorizer
from autoscaler.api.identity import ResourceAttributes, UserInfo
from autoscaler.api.review_cache import ReviewCache
from autoscaler.kube.reviews import AccessReviewResult

TTL = 10.0
KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("set"), KEYS, st.integers(0, 9)),
    st.tuples(st.just("pop"), KEYS, st.just(0)),
    st.tuples(st.just("step"), st.sampled_from([0.0, 0.5, 1.0, 2.5, 9.5, 10.0, 11.0]), st.just(0)),
    st.tuples(st.just("lookup"), KEYS, st.just(0)),
), max_size=60)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reference_lookup(cache: TTLCache[str, int], key: str) -> int | None:
    try:
        return cache[key]
    except KeyError:
        return None


@settings(max_examples=400, deadline=None)
@given(OPERATIONS)
def test_a_lookup_finds_what_the_ttl_cache_finds(operations: list[tuple[str, Any, int]]) -> None:
    clock = Clock()
    cache: ReviewCache[str, int] = ReviewCache(100, TTL, clock)
    reference: TTLCache[str, int] = TTLCache(100, TTL, timer=clock)
    for operation, argument, value in operations:
        if operation == "set":
            cache[argument] = reference[argument] = value
        elif operation == "pop":
            assert cache.pop(argument, None) == reference.pop(argument, None)
        elif operation == "step":
            clock.now += argument
        else:
            assert cache.lookup(argument, clock.now) == reference_lookup(reference, argument)
    for key in ["a", "b", "c", "d", "e"]:
        assert cache.lookup(key, clock.now) == reference_lookup(reference, key)


@settings(max_examples=400, deadline=None)
@given(OPERATIONS)
def test_a_full_cache_never_answers_an_expired_or_evicted_value(operations: list[tuple[str, Any, int]]) -> None:
    clock = Clock()
    cache: ReviewCache[str, int] = ReviewCache(2, TTL, clock)
    inserted: dict[str, tuple[int, float]] = {}
    for operation, argument, value in operations:
        if operation == "set":
            cache[argument] = value
            inserted[argument] = (value, clock.now)
        elif operation == "pop":
            cache.pop(argument, None)
            inserted.pop(argument, None)
        elif operation == "step":
            clock.now += argument
        else:
            found = cache.lookup(argument, clock.now)
            if found is not None:
                last, at = inserted[argument]
                assert found == last and clock.now < at + TTL
        assert set(cache.fresh) == set(Cache.__iter__(cache))  # the index holds exactly the TTLCache's keys


class Reviewer:
    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.reviews = 0

    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        self.reviews += 1
        return AccessReviewResult(self.answers.pop(0))


USER = UserInfo("hpa", groups=("system:authenticated",))
ATTRIBUTES = ResourceAttributes("get", "external.metrics.k8s.io", "v1beta1", "modelmesh_gpu_busy", "ml")


async def test_an_answer_is_not_used_at_its_expiry() -> None:
    clock = Clock()
    reviewer = Reviewer(True, True)
    authz = SubjectAccessReviewAuthorizer(reviewer, allowed_ttl_s=TTL, timer=clock, refresh_ahead=2.0)
    assert (await authz.authorize(USER, ATTRIBUTES)).allowed
    clock.now += TTL - 0.001
    assert authz.cached(USER, ATTRIBUTES) is not None
    clock.now += 0.001
    assert authz.cached(USER, ATTRIBUTES) is None
    assert not (await authz.authorize(USER, ATTRIBUTES)).cached
    assert reviewer.reviews == 2


async def test_a_denial_replaces_an_allowed_answer() -> None:
    """A review that denies what was allowed (refreshed ahead) takes the allowed answer out of its cache."""
    clock = Clock()
    reviewer = Reviewer(True, False)
    authz = SubjectAccessReviewAuthorizer(reviewer, allowed_ttl_s=TTL, denied_ttl_s=TTL, timer=clock,
                                          refresh_ahead=0.5)
    assert (await authz.authorize(USER, ATTRIBUTES)).allowed
    clock.now += 6.0
    assert (decision := authz.cached(USER, ATTRIBUTES)) is not None and decision.allowed  # starts the refresh
    for _ in range(10):
        if reviewer.reviews == 2 and not authz._in_flight:
            break
        await asyncio.sleep(0)
    decision = authz.cached(USER, ATTRIBUTES)
    assert decision is not None and not decision.allowed

