"""Authorization by SubjectAccessReview, cached briefly, failing closed.

Every protected request is one SubjectAccessReview for its attributes (`autoscaler.api.identity`): for an
HPA, `list` on `external.metrics.k8s.io/<metric>` in the namespace. Answers are cached (kube's delegated
authorizer does the same, 10 s each way) under the whole subject (user, uid, groups, extra) and the whole
attribute set, so a change of either is a new review. Concurrent requests with the same key share one
review instead of stampeding the API server when the cache expires.

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

from cachetools import TTLCache

from autoscaler.api.identity import Attributes, NonResourceAttributes, UserInfo
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import AccessReviewResult


class AuthorizationFailed(Exception):
    """The decision could not be made; never treated as allowed."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""
    cached: bool = False


class AccessReviewer(Protocol):
    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult: ...


class Authorizer(Protocol):
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


class SubjectAccessReviewAuthorizer:
    def __init__(self, reviewer: AccessReviewer, *, allowed_ttl_s: float = 10.0, denied_ttl_s: float = 10.0,
                 cache_size: int = 10_000, timer: Callable[[], float] = monotonic) -> None:
        self._reviewer = reviewer
        self._allowed: TTLCache[CacheKey, Decision] = TTLCache(cache_size, allowed_ttl_s, timer=timer)
        self._denied: TTLCache[CacheKey, Decision] = TTLCache(cache_size, denied_ttl_s, timer=timer)
        self._in_flight: dict[CacheKey, asyncio.Task[Decision]] = {}

    async def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        key = (user, attributes)
        try:
            return self._allowed[key]  # one lookup on the hot path (`get` is two)
        except KeyError:
            pass
        try:
            return self._denied[key]
        except KeyError:
            pass
        task = self._in_flight.get(key)
        if task is None:
            task = asyncio.create_task(self._review(key))
            self._in_flight[key] = task
            task.add_done_callback(lambda _: self._in_flight.pop(key, None))
        # shield: one caller giving up (client gone) must not cancel the review the others wait for
        return await asyncio.shield(task)

    async def _review(self, key: CacheKey) -> Decision:
        user, attributes = key
        try:
            result = await self._reviewer.review_access(access_review_spec(user, attributes))
        except KubeApiError as error:
            raise AuthorizationFailed(f"SubjectAccessReview failed: {error}") from error
        if result.allowed and result.denied:
            raise AuthorizationFailed("SubjectAccessReview answered both allowed and denied")
        decision = Decision(result.allowed, result.reason, cached=True)
        (self._allowed if result.allowed else self._denied)[key] = decision
        return Decision(result.allowed, result.reason)
