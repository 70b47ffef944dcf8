"""Authorization by SubjectAccessReview, cached briefly, failing closed.

Every protected request is one SubjectAccessReview for its attributes (`autoscaler.api.identity`): for an
HPA, `get` on `external.metrics.k8s.io/<metric>` in the namespace. Answers are cached (kube's delegated
authorizer does the same, 10 s each way) under the whole subject (user, uid, groups, extra) and the whole
attribute set, so a change of either is a new review. Concurrent requests with the same key share one
review instead of stampeding the API server when the cache expires, and at most `max_in_flight` reviews run at
once (the others wait their turn). A key still in use is reviewed again in the background once
`refresh_ahead` of its TTL has passed, so an HPA polling every 15 s keeps finding its answer cached instead of
waiting on the API server every TTL. Caches are sized for the fleet (an HPA per runtime asks for four metrics:
5,000 runtimes are 20,000 keys). Decisions on attributes longer than any this API serves
(`identity.CACHED_PATH_LENGTH` characters together) are not kept: a client sending unique paths of up to 8 KB
would otherwise fill the caches with hundreds of MB within a TTL.

One user may have at most `max_in_flight` reviews under way (running or waiting): a request that would start
one more is refused at once (`ReviewsBusy`, a 429), as kube-apiserver's priority and fairness refuses a flow
over its share. Any authenticated identity (a pod's ServiceAccount token) can ask for paths never reviewed (a
random namespace); before, its queue of reviews, each holding a connection open, grew without bound until
the aggregator's own connections were refused.

A user in `system:masters` is allowed without a review, as k8s.io/apiserver's default `AlwaysAllowGroups`:
kube-apiserver's own authorizer allows that group everything, so the review's answer is known. Among them is
the aggregator's availability probe of the APIService (`system:kube-aggregator`): reviewed, a failing or slow
review made the APIService `FailedDiscoveryCheck` for every kubectl user.

A review that fails (API server down, slow past the deadline, answering 5xx) is never "allowed" and never
cached: it raises `AuthorizationFailed`, which the API answers with a 500 `InternalError` Status, the code
kube-apiserver's `WithAuthorization` filter writes for an authorizer error (the HPA holds either way).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Any, Protocol

from autoscaler.api.identity import CACHED_PATH_LENGTH, Attributes, NonResourceAttributes, UserInfo
from autoscaler.api.review_cache import ReviewCache
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import AccessReviewResult


class AuthorizationFailed(Exception):
    """The decision could not be made; never treated as allowed."""

    def __init__(self, message: str, cause: object = None) -> None:
        super().__init__(message)
        self.cause = cause
        """What went wrong, to log once a minute per cause: the API's status code, else the kind of error."""


class ReviewsBusy(Exception):
    """The user already has as many reviews under way as may run at once; not started (429)."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""
    cached: bool = False


class AccessReviewer(Protocol):
    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult: ...


class Authorizer(Protocol):
    def cached(self, user: UserInfo, attributes: Attributes) -> Decision | None:
        """The decision if it is at hand, without a coroutine; None when `authorize` must be awaited."""
        ...

    async def authorize(self, user: UserInfo, attributes: Attributes) -> Decision: ...


def access_review_spec(user: UserInfo, attributes: Attributes) -> dict[str, Any]:
    """The `spec` of a SubjectAccessReview (authorization.k8s.io/v1) in wire form."""
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = user.extra_dict()
    if isinstance(attributes, NonResourceAttributes):
        spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
    else:
        resource = {"verb": attributes.verb, "group": attributes.group, "version": attributes.version,
                    "resource": attributes.resource}
        for key in ("namespace", "name", "subresource"):
            if value := getattr(attributes, key):
                resource[key] = value
        spec["resourceAttributes"] = resource
    return spec


CacheKey = tuple[UserInfo, Attributes]

ALWAYS_ALLOW_GROUPS = frozenset({"system:masters"})
"""k8s.io/apiserver's `DelegatingAuthorizationOptions.AlwaysAllowGroups` default."""
PRIVILEGED = Decision(True, cached=True)
"""A privileged group's decision: no review made, counted with the cached ones."""


class SubjectAccessReviewAuthorizer:
    def __init__(self, reviewer: AccessReviewer, *, allowed_ttl_s: float = 10.0, denied_ttl_s: float = 10.0,
                 cache_size: int = 65_536, timer: Callable[[], float] = monotonic, max_in_flight: int = 32,
                 refresh_ahead: float = 0.7, always_allow_groups: frozenset[str] = ALWAYS_ALLOW_GROUPS) -> None:
        self._reviewer = reviewer
        self._always_allow_groups = always_allow_groups
        self._timer = timer
        self._allowed: ReviewCache[CacheKey, tuple[Decision, float]] = ReviewCache(cache_size, allowed_ttl_s, timer)
        self._denied: ReviewCache[CacheKey, tuple[Decision, float]] = ReviewCache(cache_size, denied_ttl_s, timer)
        self._allowed_fresh, self._denied_fresh = self._allowed.fresh, self._denied.fresh
        self._refresh_after = (allowed_ttl_s * refresh_ahead, denied_ttl_s * refresh_ahead)
        self._in_flight: dict[CacheKey, asyncio.Task[Decision]] = {}
        self._slots = asyncio.Semaphore(max_in_flight)
        self._max_in_flight = max_in_flight
        self._under_way: dict[str, int] = {}
        """Reviews started and not finished (running or waiting for a slot), by user name."""

    def cached(self, user: UserInfo, attributes: Attributes) -> Decision | None:
        """The cached decision (a key in use is reviewed again in the background once `refresh_ahead` of its
        TTL has passed), or None."""
        if user.groups and not self._always_allow_groups.isdisjoint(user.groups):
            return PRIVILEGED
        key = (user, attributes)
        now = self._timer()
        # `ReviewCache.lookup` of each cache, inline: one dict lookup, where `TTLCache[key]` costs three frames
        entry = self._allowed_fresh.get(key)
        if entry is not None and now < entry[1]:
            refresh_after = self._refresh_after[0]
        else:
            entry = self._denied_fresh.get(key)
            if entry is None or not now < entry[1]:
                return None
            refresh_after = self._refresh_after[1]
        decision, stored_at = entry[0]
        if (now - stored_at >= refresh_after and key not in self._in_flight
                and self._under_way.get(user.name, 0) < self._max_in_flight):
            # nobody awaits a refresh: a failure only leaves the old answer
            self._start(key).add_done_callback(_consume)
        return decision

    async def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        """The decision; `ReviewsBusy` when it needs a review and the user has `max_in_flight` under way."""
        decision = self.cached(user, attributes)
        if decision is not None:
            return decision
        key = (user, attributes)
        if key not in self._in_flight and self._under_way.get(user.name, 0) >= self._max_in_flight:
            raise ReviewsBusy(f"{self._max_in_flight} SubjectAccessReviews of this user already under way")
        # shield: one caller giving up (client gone) must not cancel the review the others wait for
        return await asyncio.shield(self._start(key))

    def _start(self, key: CacheKey) -> asyncio.Task[Decision]:
        task = self._in_flight.get(key)
        if task is None:
            name = key[0].name
            self._under_way[name] = self._under_way.get(name, 0) + 1
            task = asyncio.create_task(self._review(key))
            self._in_flight[key] = task
            task.add_done_callback(lambda _: self._finished(key))
        return task

    def _finished(self, key: CacheKey) -> None:
        self._in_flight.pop(key, None)
        name = key[0].name
        left = self._under_way.get(name, 0) - 1
        if left > 0:
            self._under_way[name] = left
        else:
            self._under_way.pop(name, None)

    async def _review(self, key: CacheKey) -> Decision:
        user, attributes = key
        async with self._slots:
            try:
                result = await self._reviewer.review_access(access_review_spec(user, attributes))
            except KubeApiError as error:
                raise AuthorizationFailed(f"SubjectAccessReview failed: {error}", error.cause) from error
        if result.allowed and result.denied:
            raise AuthorizationFailed("SubjectAccessReview answered both allowed and denied", "both")
        if sum(map(len, attributes)) <= CACHED_PATH_LENGTH:  # longer: no path this API serves
            entry = (Decision(result.allowed, result.reason, cached=True), self._timer())
            (self._allowed if result.allowed else self._denied)[key] = entry
            (self._denied if result.allowed else self._allowed).pop(key, None)
        return Decision(result.allowed, result.reason)


def _consume(task: asyncio.Task[Decision]) -> None:
    if not task.cancelled():
        task.exception()
