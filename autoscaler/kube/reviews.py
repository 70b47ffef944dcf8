"""The three Kubernetes API calls authentication and authorization need: TokenReview, SubjectAccessReview and
reading the `kube-system/extension-apiserver-authentication` ConfigMap.

Uses `kubernetes.aio` (the official client's asyncio flavour) so a slow API server never blocks the event
loop, with no client retries and a hard deadline per call: an HPA request waiting on authorization should get
an answer (possibly an error) in seconds, not pile up behind a dead API server. Every library or transport
exception is turned into `KubeApiError` here, with the cause chained; configuration problems at start-up
become `KubeConfigError`, a `ValueError` the CLI reports in one line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import OpenApiException

from autoscaler.kube.config import load_kube_settings
from autoscaler.kube.errors import KubeApiError, KubeConfigError
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 2.0
"""Per call. A SubjectAccessReview normally takes milliseconds; two seconds tolerates a busy API server while
keeping an HPA request (whose client gives up after tens of seconds) well inside its own deadline."""


@dataclass(frozen=True, slots=True)
class TokenReviewResult:
    authenticated: bool
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class AccessReviewResult:
    """`allowed` only when the review said so; `denied` is an explicit deny (no opinion is neither). An
    `evaluation_error` (e.g. a binding to a missing role) does not change the decision, as in kube."""

    allowed: bool
    denied: bool = False
    reason: str = ""
    evaluation_error: str = ""


async def load_configuration(kubeconfig: Path | None) -> client.Configuration:
    """The shared connection settings (`autoscaler.kube.config`), with a hint fit for this use on failure."""
    try:
        settings = await load_kube_settings(kubeconfig)
    except KubeConfigError as error:
        raise KubeConfigError(
            f"authentication and authorization need the Kubernetes API: {error}; pass --kubeconfig, run in a "
            "cluster, or use --insecure-dev for a local demo") from error
    settings.configuration.retries = None
    return settings.configuration


class KubeAuthApi:
    """TokenReview, SubjectAccessReview and ConfigMap reads with a deadline; errors as `KubeApiError`."""

    def __init__(self, configuration: client.Configuration, metrics: AdapterMetrics | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._api = client.ApiClient(configuration)
        self._authn = client.AuthenticationV1Api(self._api)
        self._authz = client.AuthorizationV1Api(self._api)
        self._core = client.CoreV1Api(self._api)
        self._metrics = metrics
        self.timeout_s = timeout_s

    async def close(self) -> None:
        await self._api.close()  # type: ignore[no-untyped-call]

    async def _call(self, name: str, make: Callable[[float], Awaitable[T]]) -> T:
        started = time.perf_counter()
        outcome = "error"
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await make(float(self.timeout_s))
            outcome = "ok"
            return result
        except OpenApiException as error:
            status = getattr(error, "status", None)
            raise KubeApiError(f"{name}: the API server answered {status} {getattr(error, 'reason', '')}",
                               status, str(getattr(error, "reason", "") or "")) from error
        except TimeoutError as error:
            outcome = "timeout"
            raise KubeApiError(f"{name}: no answer within {self.timeout_s:g} s") from error
        except (aiohttp.ClientError, OSError, ValueError, TypeError) as error:
            raise KubeApiError(f"{name}: {type(error).__name__}: {error}") from error
        finally:
            if self._metrics is not None:
                self._metrics.kube_api_seconds.labels(name, outcome).observe(time.perf_counter() - started)

    async def review_token(self, token: str) -> TokenReviewResult:
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        review = await self._call(
            "tokenreview", lambda timeout: self._authn.create_token_review(body, _request_timeout=timeout))
        status = review.status
        user = status.user if status is not None else None
        if status is None or not status.authenticated or user is None or not user.username:
            return TokenReviewResult(False, error=(status.error if status is not None else "") or "")
        extra = tuple(sorted((key, tuple(values)) for key, values in (user.extra or {}).items()))
        return TokenReviewResult(True, user.username, user.uid or "", tuple(user.groups or ()), extra)

    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        """`spec` is a SubjectAccessReview spec in wire form (camelCase keys)."""
        try:
            body = client.V1SubjectAccessReview.from_dict({"spec": spec})
        except ValueError as error:  # pydantic's ValidationError
            raise KubeApiError(f"subjectaccessreview: cannot build a review: {error}") from error
        if body is None:
            raise KubeApiError("subjectaccessreview: cannot build a review")
        review = await self._call(
            "subjectaccessreview",
            lambda timeout: self._authz.create_subject_access_review(body, _request_timeout=timeout))
        status = review.status
        if status is None:
            raise KubeApiError("subjectaccessreview: answered without a status")
        return AccessReviewResult(bool(status.allowed), bool(status.denied), status.reason or "",
                                  status.evaluation_error or "")

    async def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's `data`, or None when it does not exist."""
        try:
            config_map = await self._call(
                "configmap",
                lambda timeout: self._core.read_namespaced_config_map(name, namespace, _request_timeout=timeout))
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        return dict(config_map.data or {})
