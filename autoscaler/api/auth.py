"""The API's gate: authenticate, then authorize, then serve; and the composition of the parts that do it.

Order and answers follow kube-apiserver's filter chain:
- paths in `--authorization-always-allow-paths` (the health paths by default; a trailing `*` matches a prefix)
  are served with no authentication at all, so probes never depend on the Kubernetes API; as in kube, only
  non-resource requests (`autoscaler.api.open_paths`); `/metrics` is authorized as `get` on the non-resource
  URL, as kube-apiserver's own;
- no accepted credentials: 401 `Unauthorized`; so is a bearer token whose TokenReview cannot be made (API down,
  slow, or refusing the adapter), as kube-apiserver answers an authenticator's error, but that is logged as a
  WARNING (once a minute per cause: `log_limit.LogLimiter`) and counted as `result="error"`, not as a bad token;
- the SubjectAccessReview denies: 403 `Forbidden`, with kube's message (`User "u" cannot list resource ...`);
- the review cannot be made (API down or slower than its deadline): 500 `InternalError`, never allowed, logged
  once a minute per cause;
- the user already has as many reviews under way as may run at once: 429 `TooManyRequests` (`authz`); so is
  a bearer token not reviewed lately while `--max-in-flight-reviews` TokenReviews are under way, or while its
  client address has its share of them (a quarter) under way (not judged, so not a 401: `authn.TokenReviewsBusy`).
Authorization happens before routing decides anything, so a caller without rights cannot learn which
runtimes or metrics exist.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from autoscaler.api import authconfig
from autoscaler.api.app import Gate
from autoscaler.api.authn import (
    AuthenticationBusy,
    AuthenticationUnavailable,
    Authenticator,
    ClientCertificateAuthenticator,
    RequestHeaderAuthenticator,
    TokenAuthenticator,
    Unauthenticated,
    UnionAuthenticator,
)
from autoscaler.api.authz import (
    AuthorizationFailed,
    Authorizer,
    Decision,
    ReviewsBusy,
    SubjectAccessReviewAuthorizer,
)
from autoscaler.api.ca_reload import ClientCaReloader
from autoscaler.api.client_certs import ClientCertificateInspector, trust_client_certificates
from autoscaler.api.identity import (
    CACHED_PATH_LENGTH,
    Attributes,
    ResourceAttributes,
    UserInfo,
    cached_get_attributes,
    describe,
    request_attributes,
)
from autoscaler.api.open_paths import AlwaysAllowPaths, is_non_resource
from autoscaler.api.status import ApiError
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.kube.reviews import DEFAULT_TIMEOUT_S, KubeAuthApi, load_review_connection
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from exporter.log_limit import LogLimiter
from exporter.stopping import stop_tasks

log = logging.getLogger(__name__)


def auth_gate(authenticator: UnionAuthenticator, authorizer: Authorizer, always_allow: AlwaysAllowPaths,
              metrics: AdapterMetrics) -> Gate:
    """The gate of `autoscaler.api.app`: lets a request through, or refuses it with the `ApiError` kube would
    answer (raised at once, or by the awaitable it returns)."""
    unauthenticated = metrics.authentications.labels("none", "failure")
    unreviewed = metrics.authentications.labels("token", "error")
    limiter = LogLimiter()
    """One WARNING a minute per cause of a review that cannot be made: an outage must not write a line a request."""
    authenticated = {a.method: metrics.authentications.labels(a.method, "success")
                     for a in authenticator.authenticators}
    decisions = {(allowed, cached): metrics.authorizations.labels("allowed" if allowed else "denied",
                                                                  "true" if cached else "false")
                 for allowed in (True, False) for cached in (True, False)}
    errors = metrics.authorizations.labels("error", "false")
    tally = metrics.tally
    open_exact, open_prefixes = always_allow.exact, always_allow.prefixes

    def gate(request: web.Request) -> Awaitable[None] | None:
        # The usual request (the same connection and headers as the previous one, its decision cached) is
        # decided here without a coroutine; anything else continues in one. `AlwaysAllowPaths.opens` (its
        # resource check only for a listed path) and `request_attributes` inline: each Python call is a few
        # hundred instructions of every request.
        raw_path = request.rel_url.raw_path
        if "%" in raw_path:  # kube matches the decoded path
            if always_allow.opens(request.method, raw_path, request.path):
                return None
        elif (raw_path in open_exact or (open_prefixes and raw_path.startswith(open_prefixes))) \
                and is_non_resource(request.method, raw_path):  # as kube: never a resource request
            return None
        remembered = authenticator.remembered(request)
        if remembered is None:
            return authenticate_then_authorize(request)
        user, method = remembered
        verb = request.method  # `request_attributes` inline
        attributes = (cached_get_attributes(raw_path) if verb == "GET" and len(raw_path) <= CACHED_PATH_LENGTH
                      else request_attributes(verb, raw_path))
        decision = authorizer.cached(user, attributes)
        if decision is None:
            tally.count(authenticated[method])
            return authorize(request, user, attributes)
        if decision.allowed:  # `admit`'s allowed case, inline: the usual request
            tally.count_both(authenticated[method], decisions[True, decision.cached])
            return None
        tally.count(authenticated[method])
        admit(decision, user, attributes)
        return None

    async def authenticate_then_authorize(request: web.Request) -> None:
        try:
            user, method = await authenticator.authenticate(request)
        except AuthenticationUnavailable as error:
            tally.count(unreviewed)
            cause = error.failure.cause
            suppressed = limiter.admit(("tokenreview", cause))
            if suppressed is not None:
                hint = (": the adapter's ServiceAccount needs the system:auth-delegator ClusterRoleBinding"
                        if cause == 403 else "")
                log.warning("Unable to authenticate the request: %s %r answered 401 because the TokenReview of "
                            "its bearer token could not be made (%s)%s%s", request.method, request.path,
                            error.failure, hint, limiter.note(suppressed))
            raise ApiError(401, "Unauthorized") from None
        except Unauthenticated as error:
            tally.count(unauthenticated)
            log.debug("401 for %s %r: %s", request.method, request.path, error)
            raise ApiError(401, "Unauthorized") from None
        except AuthenticationBusy as error:
            tally.count(unauthenticated)
            log.debug("429 for %s %r: %s", request.method, request.path, error)
            raise ApiError(429, "Too many requests: too many TokenReviews under way to check this bearer token; "
                                "try again shortly", retry_after_s=1) from None
        tally.count(authenticated[method])
        await authorize(request, user, request_attributes(request.method, request.rel_url.raw_path))

    async def authorize(request: web.Request, user: UserInfo, attributes: Attributes) -> None:
        try:
            decision = await authorizer.authorize(user, attributes)
        except ReviewsBusy as error:
            log.debug("429 for %s %r for %r: %s", request.method, request.path, user.name, error)
            raise ApiError(429, f'Too many requests: user "{user.name}" has too many authorization checks under '
                                "way; try again shortly", retry_after_s=1) from None
        except AuthorizationFailed as error:
            tally.count(errors)
            suppressed = limiter.admit(("subjectaccessreview", error.cause))
            if suppressed is not None:
                log.warning("cannot authorize %s %r for %r: %s (answered 500)%s", request.method, request.path,
                            user.name, error, limiter.note(suppressed))
            raise ApiError(500, "Internal error occurred: the request could not be authorized right now "
                                "(Kubernetes API unavailable); try again later") from None
        admit(decision, user, attributes)

    def admit(decision: Decision, user: UserInfo, attributes: Attributes) -> None:
        tally.count(decisions[decision.allowed, decision.cached])
        if not decision.allowed:
            target = "forbidden: "
            if isinstance(attributes, ResourceAttributes):  # kube's `NewForbidden`: the object named, where one is
                named = f' "{attributes.name}"' if attributes.name else ""
                target = f"{attributes.resource}.{attributes.group}{named} is forbidden: "
            reason = f": {decision.reason}" if decision.reason else ""
            raise ApiError(403, f'{target}User "{user.name}" cannot {describe(attributes)}{reason}')

    return gate


@dataclass
class ApiSecurity:
    """The gate to install, and what to close when the server stops."""

    gate: Gate
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    reload_client_cas: Callable[[], Awaitable[bool]] | None = None
    """Re-read the client CAs now (they are also re-read every minute); True when they changed."""

    async def close(self, app: web.Application | None = None) -> None:
        for close in self.closers:
            await close()


async def build_api_security(settings: ServeSettings, tls: ssl.SSLContext | None, metrics: AdapterMetrics,
                             *, connection: ReviewConnection | None = None, kube_timeout_s: float = DEFAULT_TIMEOUT_S,
                             clock: Callable[[], float] = time.time) -> ApiSecurity:
    """Connect to the Kubernetes API, learn the front-proxy settings, make `tls` ask for client certificates.
    `connection`: the settings the refresh process loaded for a serving worker (else they are loaded here, with
    the Kubernetes library). `clock` (POSIX seconds) is what client certificates' validity is checked against on
    each request.

    Raises `ValueError` subclasses (`KubeConfigError`, `AuthConfigError`) for start-up mistakes.
    """
    if connection is None:
        connection = await load_review_connection(settings.kubeconfig)
    kube = await KubeAuthApi.connect(connection, metrics, kube_timeout_s,
                                     max_connections=settings.max_in_flight_reviews)
    try:
        config = await authconfig.resolve(settings, kube)
    except BaseException:
        await kube.close()
        raise
    if tls is not None:
        trust_client_certificates(tls, config.requestheader_ca, config.client_ca)
    inspector = ClientCertificateInspector(config.requestheader_ca, config.client_ca, clock=clock)
    always_allow = AlwaysAllowPaths.parse(settings.authorization_always_allow_paths)  # checked at start already
    authenticators: list[Authenticator] = []
    requestheader = RequestHeaderAuthenticator(inspector, config.rules) if config.requestheader_ca else None
    if requestheader is not None:
        authenticators.append(requestheader)
    if config.client_ca is not None:
        authenticators.append(ClientCertificateAuthenticator(inspector))
    authenticators.append(TokenAuthenticator(kube, settings.token_cache_ttl_s,
                                             max_in_flight=settings.max_in_flight_reviews))
    log.info("authentication from %s: %s; allowed front-proxy names: %s; open paths (non-resource requests only): "
             "%s", config.source, ", ".join(a.method for a in authenticators),
             ", ".join(sorted(config.rules.allowed_names)) or "any",
             ", ".join(always_allow.entries) or "none")
    if config.requestheader_ca is None:
        log.warning("no requestheader CA: requests through the aggregation layer (the HPA) cannot authenticate")
    elif not config.rules.allowed_names:
        log.warning("requestheader allowed names are empty: any client certificate from the front-proxy CA may "
                    "assert any user in X-Remote-User; set --requestheader-allowed-names (usually "
                    "front-proxy-client)")
    authorizer = SubjectAccessReviewAuthorizer(
        kube, allowed_ttl_s=settings.authorized_cache_ttl_s, denied_ttl_s=settings.unauthorized_cache_ttl_s,
        max_in_flight=settings.max_in_flight_reviews)
    gate = auth_gate(UnionAuthenticator(authenticators, inspector), authorizer,
                     always_allow, metrics)
    reloader = ClientCaReloader(settings, kube, tls, inspector, config, requestheader=requestheader)
    reloading = asyncio.create_task(reloader.run(), name="client-ca-reload")

    async def stop_reloading() -> None:
        await stop_tasks([reloading])  # even a ConfigMap read that takes its first cancel for a timeout

    return ApiSecurity(gate, [stop_reloading, kube.close], reloader.check)
