"""Requests cannot be used to flood the Kubernetes API server with reviews (issue 14): concurrent requests
with one token share one TokenReview, random tokens are refused rather than reviewed without bound, and
concurrent requests with one subject and path share one SubjectAccessReview. Against the real gate over TLS
and the fake Kubernetes API, slowed down so that the requests really overlap."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.api.auth import build_api_security
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.api.conftest import SecuredApi

HPA = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}


async def test_fifty_concurrent_requests_with_one_unknown_token_make_one_token_review(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.delay("tokenreviews", 0.3)
    answers = await asyncio.gather(*(secured.get(metric_path(), token="unknown-token") for _ in range(50)))
    assert {status for status, _ in answers} == {401}
    assert len(secured.kube.token_reviews) == 1


async def test_random_bearer_tokens_are_refused_without_a_review_each(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    """Those reviewed get 401; those past the cap on reviews under way, or past the client's share of it (a
    quarter: counted exactly in `test_token_review_share.py`), were not judged: 429, try again."""
    secured.kube.delay("tokenreviews", 0.5)
    answers = await asyncio.gather(*(secured.get(metric_path(), token=secrets.token_hex(16)) for _ in range(80)))
    statuses = [status for status, _ in answers]
    cap = ServeSettings().max_in_flight_reviews
    assert set(statuses) == {401, 429}
    assert statuses.count(401) <= cap and len(secured.kube.token_reviews) <= cap


async def test_a_known_token_is_still_accepted_after_a_flood_of_random_ones(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.tokens["good"] = ("admin", ["admins"])
    secured.kube.allow(user="admin", verb="list", group="external.metrics.k8s.io")
    status, _ = await secured.get(metric_path(), token="good")
    assert status == 200
    await asyncio.gather(*(secured.get(metric_path(), token=secrets.token_hex(16)) for _ in range(40)))
    reviews = len(secured.kube.token_reviews)
    status, _ = await secured.get(metric_path(), token="good")
    assert status == 200
    assert len(secured.kube.token_reviews) == reviews  # still cached: the flood did not evict it


async def test_fifty_concurrent_requests_of_one_subject_and_path_make_one_access_review(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user=HPA["X-Remote-User"], verb="list", group="external.metrics.k8s.io")
    secured.kube.delay("subjectaccessreviews", 0.3)
    answers = await asyncio.gather(*(secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA)
                                     for _ in range(50)))
    assert {status for status, _ in answers} == {200}
    assert len(secured.kube.access_reviews) == 1


async def test_an_empty_requestheader_allowed_names_is_a_warning_at_start(
        settings_for: Callable[..., ServeSettings], caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    with caplog.at_level(logging.WARNING, logger="autoscaler.api.auth"):
        security = await build_api_security(settings_for(requestheader_allowed_names=()), None, AdapterMetrics())
        await security.close()
    assert any("--requestheader-allowed-names" in record.getMessage() and record.levelno == logging.WARNING
               for record in caplog.records)


async def test_allowed_names_set_gives_no_such_warning(
        settings_for: Callable[..., ServeSettings], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="autoscaler.api.auth"):
        security = await build_api_security(settings_for(), None, AdapterMetrics())
        await security.close()
    assert not any("--requestheader-allowed-names" in record.getMessage() for record in caplog.records)
