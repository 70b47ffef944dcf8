"""The three Kubernetes API calls authentication and authorization need: TokenReview, SubjectAccessReview and
reading the `kube-system/extension-apiserver-authentication` ConfigMap.

A lean client: one `aiohttp` session with the connection settings `autoscaler.kube.config` loads, as plain facts
(`autoscaler.kube.review_connection`: CA, client certificate, bearer token or the file it is read again from),
JSON in and out, no generated models and no Kubernetes library: a serving worker of `serve --workers N` runs
these reviews and never loads it (about 20 MiB each). These
calls sit on the path of HPA requests whose answer is not cached yet, so they should cost one round trip and
little else: the generated client builds and validates pydantic models and reads `~/.netrc` on every call.
A review the API server fails (429, 5xx, no answer) is tried again (`autoscaler.kube.review_backoff`, as
k8s.io/apiserver's delegated authenticator and authorizer), all tries within one deadline per review: an HPA
request waiting on authorization gets an answer (possibly an error) within it rather than piling up behind a
dead API server. Every transport failure and
error answer becomes `KubeApiError` (cause chained, status and Status `reason` kept); configuration problems
at start-up become `KubeConfigError`, a `ValueError` the CLI reports in one line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from autoscaler.kube.errors import KubeApiError, KubeConfigError
from autoscaler.kube.raw import describe, status_error
from autoscaler.kube.review_backoff import TRIES, wait_before_try, worth_another_try
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.kube.token_file import TokenFile
from autoscaler.kube.user_agent import user_agent
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
"""Per review, all its tries together: k8s.io/apiserver's delegated authorizer and authenticator wait 10 s
(`ClientTimeout`, `TokenRequestTimeout`). A review normally takes milliseconds; at 2 s, one the API server
answered after 3 s under load was the HPA's 500. A request waits at most this for its TokenReview and this for
its SubjectAccessReview (docs/operations.md), inside the HPA's own 30 s."""


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


async def load_review_connection(kubeconfig: Path | None) -> ReviewConnection:
    """The shared connection settings (`autoscaler.kube.config`) as plain facts, with a hint fit for this use on
    failure. Loads the Kubernetes library: the refresh process calls it once and hands the result to its workers."""
    from autoscaler.kube.config import load_kube_settings

    try:
        settings = await load_kube_settings(kubeconfig)
    except KubeConfigError as error:
        raise KubeConfigError(
            f"authentication and authorization need the Kubernetes API: {error}; pass --kubeconfig, run in a "
            "cluster, or use --insecure-dev for a local demo") from error
    return ReviewConnection.of(settings, kubeconfig)


@dataclass(frozen=True, slots=True)
class PluginToken:
    """A kubeconfig user's exec plugin token, as `autoscaler.kube.credentials` keeps it current for the library's
    clients: this client's session carries the same trace, or a token revoked before its expiry was never fetched
    again here (every review answered 401 until five minutes before that expiry)."""

    authorization: Callable[[], Awaitable[str | None]]
    """The current `Authorization`, the plugin run again when due."""
    trace_configs: tuple[aiohttp.TraceConfig, ...]
    """The requests' traces by which a 401 to the token runs the plugin again."""
    end: Callable[[], Awaitable[None]]
    """Ends a plugin run under way and its processes, as the client closes."""


async def _plugin_token(kubeconfig: Path | None) -> PluginToken:
    """The token of a kubeconfig user's exec plugin: only the library runs it (`autoscaler.kube.credentials`),
    so a worker of such a user loads the library after all."""
    from autoscaler.kube.config import load_kube_settings
    from autoscaler.kube.exec_plugin import end_renewal

    configuration = (await load_kube_settings(kubeconfig)).configuration

    async def authorization() -> str | None:
        value = await configuration.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None

    async def end() -> None:
        await end_renewal(configuration)

    return PluginToken(authorization, tuple(configuration.trace_configs or ()), end)


TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class KubeAuthApi:
    """TokenReview, SubjectAccessReview and ConfigMap reads with a deadline; errors as `KubeApiError`."""

    def __init__(self, connection: ReviewConnection, metrics: AdapterMetrics | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_connections: int = 32,
                 plugin_token: PluginToken | None = None) -> None:
        """`plugin_token`: where `connection.from_plugin`, the exec plugin's (`connect` makes it)."""
        self._connection = connection
        self._base = connection.host
        self._tls = connection.tls_context()
        self._token_file = TokenFile(connection.token_file) if connection.token_file is not None else None
        self._plugin_token = plugin_token
        self._server_hostname = connection.tls_server_name if self._tls is not None else None
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._metrics = metrics
        self.timeout_s = timeout_s
        self._draw: Callable[[], float] = random.random
        """Spreads the waits between tries (`review_backoff.wait_before_try`)."""

    @classmethod
    async def connect(cls, connection: ReviewConnection, metrics: AdapterMetrics | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S, max_connections: int = 32) -> KubeAuthApi:
        """The client of `connection`; for an exec plugin's token, with the library loaded to run the plugin."""
        plugin = await _plugin_token(connection.kubeconfig) if connection.from_plugin else None
        return cls(connection, metrics, timeout_s, max_connections, plugin)

    async def _authorization(self) -> str | None:
        """The adapter's own `Authorization` header, current: a token file read again as the kubelet rotates
        it (the last token read while it cannot be), an exec plugin's token, or the token given once."""
        if self._token_file is not None:
            token = self._token_file.token()
            if token is not None:
                return f"Bearer {token}"
        if self._plugin_token is not None:
            return await self._plugin_token.authorization()
        return self._connection.authorization

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else False,
                                             limit=self._max_connections)
            traces = list(self._plugin_token.trace_configs) if self._plugin_token is not None else None
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False, trace_configs=traces,
                                                  headers={"Accept": "application/json",
                                                           "User-Agent": user_agent("reviews")})
        return self._session

    async def close(self) -> None:
        if self._plugin_token is not None:
            await self._plugin_token.end()
        if self._session is not None:
            await self._session.close()

    async def _call(self, name: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The answer, the call tried again while it fails in a way worth it (`review_backoff`), all tries
        within `timeout_s`; the last failure as `KubeApiError` when none succeeded."""
        deadline = time.monotonic() + self.timeout_s
        failed = 0
        while True:
            try:
                return await self._try(name, method, path, body, deadline - time.monotonic())
            except KubeApiError as error:
                failed += 1
                wait = wait_before_try(failed, self._draw(), error.retry_after_s)
                if (failed >= TRIES or not worth_another_try(error)
                        or time.monotonic() + wait >= deadline):
                    if failed > 1:
                        raise KubeApiError(f"{error} (tried {failed} times)", error.status, error.reason,
                                           error.retry_after_s) from error.__cause__
                    raise
                log.debug("%s failed (%s); trying again in %.2f s", name, error, wait)
                await asyncio.sleep(wait)

    async def _try(self, name: str, method: str, path: str, body: dict[str, Any] | None, left_s: float) -> Any:
        started = time.perf_counter()
        outcome = "error"
        try:
            async with asyncio.timeout(max(left_s, 0.0)):
                headers = {"Content-Type": "application/json"} if body is not None else {}
                authorization = await self._authorization()
                if authorization:
                    headers["Authorization"] = authorization
                async with self._client().request(
                        method, self._base + path, headers=headers, server_hostname=self._server_hostname,
                        data=json.dumps(body).encode() if body is not None else None) as response:
                    raw = await response.read()
            try:
                answer = json.loads(raw) if raw else None
            except ValueError:
                answer = raw.decode("utf-8", "replace")
            if response.status >= 300:
                raise status_error(name, response.status, answer, response.headers.get("Retry-After"))
            if not isinstance(answer, dict):
                raise KubeApiError(f"{name}: the answer is not a JSON object", response.status)
            outcome = "ok"
            return answer
        except TimeoutError as error:
            outcome = "timeout"
            raise KubeApiError(f"{name}: no answer within {self.timeout_s:g} s") from error
        except (aiohttp.ClientError, OSError, ValueError) as error:
            raise KubeApiError(f"{name}: {describe(error)}") from error
        finally:
            if self._metrics is not None:
                self._metrics.kube_api_seconds.labels(name, outcome).observe(time.perf_counter() - started)

    async def review_token(self, token: str) -> TokenReviewResult:
        review = await self._call("tokenreview", "POST", TOKEN_REVIEWS, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = review.get("status")
        if not isinstance(status, dict):
            return TokenReviewResult(False, error="answered without a status")
        user = status.get("user")
        if not status.get("authenticated") or not isinstance(user, dict) or not user.get("username"):
            return TokenReviewResult(False, error=str(status.get("error") or ""))
        extra = user.get("extra") or {}
        return TokenReviewResult(
            True, str(user["username"]), str(user.get("uid") or ""),
            tuple(str(group) for group in user.get("groups") or ()),
            tuple(sorted((str(key), tuple(str(v) for v in values or ())) for key, values in extra.items()))
            if isinstance(extra, dict) else (),
        )

    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        """`spec` is a SubjectAccessReview spec in wire form (camelCase keys)."""
        review = await self._call("subjectaccessreview", "POST", ACCESS_REVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        status = review.get("status")
        if not isinstance(status, dict):
            raise KubeApiError("subjectaccessreview: answered without a status")
        return AccessReviewResult(bool(status.get("allowed")), bool(status.get("denied")),
                                  str(status.get("reason") or ""), str(status.get("evaluationError") or ""))

    async def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's `data`, or None when it does not exist."""
        try:
            config_map = await self._call("configmap", "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        data = config_map.get("data") or {}
        return {str(key): str(value) for key, value in data.items()} if isinstance(data, dict) else {}
