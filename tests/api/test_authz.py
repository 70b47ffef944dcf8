"""The SubjectAccessReview authorizer against a scripted reviewer and a stepped clock."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import pytest

from autoscaler.api.authz import AuthorizationFailed, SubjectAccessReviewAuthorizer
from autoscaler.api.identity import NonResourceAttributes, ResourceAttributes, UserInfo
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import AccessReviewResult

ATTRIBUTES = ResourceAttributes("get", "external.metrics.k8s.io", "v1beta1", "modelmesh_gpu_busy", "ml")
USER = UserInfo("hpa", groups=("system:authenticated",))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedReviewer:
    """Answers from a list; an exception in it is raised; `gate` holds answers until set."""

    def __init__(self, *answers: AccessReviewResult | Exception) -> None:
        self.answers = list(answers)
        self.specs: list[dict[str, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        self.specs.append(spec)
        await self.gate.wait()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def authorizer(reviewer: ScriptedReviewer, clock: Clock) -> SubjectAccessReviewAuthorizer:
    return SubjectAccessReviewAuthorizer(reviewer, allowed_ttl_s=10, denied_ttl_s=5, timer=clock)


async def test_allowed_answers_are_cached_for_their_ttl() -> None:
    clock, reviewer = Clock(), ScriptedReviewer(AccessReviewResult(True, reason="rbac"))
    authz = authorizer(reviewer, clock)
    first = await authz.authorize(USER, ATTRIBUTES)
    assert first.allowed and not first.cached and first.reason == "rbac"
    clock.now = 9.9
    assert (await authz.authorize(USER, ATTRIBUTES)).cached
    clock.now = 10.1
    assert not (await authz.authorize(USER, ATTRIBUTES)).cached
    assert len(reviewer.specs) == 2


async def test_denials_have_their_own_ttl() -> None:
    clock, reviewer = Clock(), ScriptedReviewer(AccessReviewResult(False))
    authz = authorizer(reviewer, clock)
    assert not (await authz.authorize(USER, ATTRIBUTES)).allowed
    clock.now = 4.9
    assert (await authz.authorize(USER, ATTRIBUTES)).cached
    clock.now = 5.1
    await authz.authorize(USER, ATTRIBUTES)
    assert len(reviewer.specs) == 2


@pytest.mark.parametrize(
    "other",
    [
        (UserInfo("hpa", groups=("system:authenticated", "x")), ATTRIBUTES),
        (UserInfo("hpa", uid="1", groups=("system:authenticated",)), ATTRIBUTES),
        (UserInfo("hpa", groups=("system:authenticated",), extra=(("k", ("v",)),)), ATTRIBUTES),
        (USER, ResourceAttributes("get", "external.metrics.k8s.io", "v1beta1", "modelmesh_gpu_busy", "other")),
        (USER, NonResourceAttributes("get", "/apis")),
    ],
    ids=["groups", "uid", "extra", "namespace", "non-resource"],
)
async def test_the_cache_key_is_the_whole_subject_and_request(other: tuple[UserInfo, Any]) -> None:
    reviewer = ScriptedReviewer(AccessReviewResult(True))
    authz = authorizer(reviewer, Clock())
    await authz.authorize(USER, ATTRIBUTES)
    await authz.authorize(*other)
    assert len(reviewer.specs) == 2


async def test_concurrent_requests_share_one_review() -> None:
    reviewer = ScriptedReviewer(AccessReviewResult(True))
    reviewer.gate.clear()
    authz = authorizer(reviewer, Clock())
    waiters = [asyncio.create_task(authz.authorize(USER, ATTRIBUTES)) for _ in range(20)]
    await asyncio.sleep(0)
    waiters[0].cancel()  # one client going away must not cancel the review the others wait for
    reviewer.gate.set()
    results = await asyncio.gather(*waiters[1:])
    assert all(result.allowed for result in results)
    assert len(reviewer.specs) == 1


async def test_errors_fail_closed_and_are_not_cached() -> None:
    reviewer = ScriptedReviewer(KubeApiError("down"), AccessReviewResult(True))
    authz = authorizer(reviewer, Clock())
    with pytest.raises(AuthorizationFailed):
        await authz.authorize(USER, ATTRIBUTES)
    assert (await authz.authorize(USER, ATTRIBUTES)).allowed


async def test_an_answer_both_allowed_and_denied_is_an_error() -> None:
    authz = authorizer(ScriptedReviewer(AccessReviewResult(True, denied=True)), Clock())
    with pytest.raises(AuthorizationFailed):
        await authz.authorize(USER, ATTRIBUTES)


async def test_an_evaluation_error_does_not_change_a_denial_into_an_error() -> None:
    authz = authorizer(ScriptedReviewer(AccessReviewResult(False, evaluation_error="role x not found")), Clock())
    assert not (await authz.authorize(USER, ATTRIBUTES)).allowed


async def test_a_key_in_use_is_reviewed_again_in_the_background_before_its_answer_expires() -> None:
    clock, reviewer = Clock(), ScriptedReviewer(AccessReviewResult(True))
    authz = authorizer(reviewer, clock)
    await authz.authorize(USER, ATTRIBUTES)
    clock.now = 8.0  # past 70% of the 10 s TTL: answered from the cache, refreshed behind it
    reviewer.gate.clear()
    assert (await authz.authorize(USER, ATTRIBUTES)).cached
    await asyncio.sleep(0)
    assert len(reviewer.specs) == 2
    reviewer.gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    clock.now = 12.0  # the first answer has expired; the refreshed one has not
    assert (await authz.authorize(USER, ATTRIBUTES)).cached
    assert len(reviewer.specs) == 2


async def test_a_failed_background_review_leaves_the_cached_answer_until_it_expires() -> None:
    clock = Clock()
    reviewer = ScriptedReviewer(AccessReviewResult(True), KubeApiError("API server down"))
    authz = authorizer(reviewer, clock)
    await authz.authorize(USER, ATTRIBUTES)
    clock.now = 8.0
    assert (await authz.authorize(USER, ATTRIBUTES)).allowed
    await asyncio.sleep(0)
    clock.now = 9.0
    assert (await authz.authorize(USER, ATTRIBUTES)).cached
    clock.now = 10.5
    with pytest.raises(AuthorizationFailed):
        await authz.authorize(USER, ATTRIBUTES)


class DenyingReviewer:
    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        return AccessReviewResult(False)


async def test_decisions_on_unique_long_paths_do_not_pile_up_in_the_cache() -> None:
    """Any authenticated client can ask for unique paths of up to 8 KB, each reviewed (and denied): kept for
    the TTL, as fast as the API server answers, they could hold hundreds of MB."""
    authz = SubjectAccessReviewAuthorizer(DenyingReviewer(), timer=Clock())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2_000):
            assert not (await authz.authorize(USER, NonResourceAttributes("get", f"/x/{i}/" + "a" * 8_000))).allowed
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000  # bytes
