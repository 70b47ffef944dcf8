"""Authentication as Kubernetes extension API servers do it (`k8s.io/apiserver/pkg/authentication`).

Three authenticators, tried in kube's order; the first that recognizes the request decides:

1. **requestheader** (the aggregator): the client certificate was issued by the requestheader CA and its CN
   is in `--requestheader-allowed-names` (empty list: any CN). Only then is the user read from the
   username headers (`X-Remote-User`), groups from the group headers (`X-Remote-Group`, every value), extra
   fields from the prefixed headers (`X-Remote-Extra-<key>`, key lower-cased and percent-decoded) and the
   UID from the uid headers where configured. A front-proxy certificate with a CN not allowed is an error; a
   request without a certificate from that CA never has its identity headers read.
2. **x509**: a client certificate issued by `--client-ca-file`: user = CN, groups = O values.
3. **token**: `Authorization: Bearer <token>`, checked with a TokenReview; answers (yes and no) are cached for
   `--authentication-token-webhook-cache-ttl` under the token's SHA-256 so a busy client costs one review per
   TTL. Concurrent requests with the same token share one review, and at most `max_in_flight` reviews run at
   once: a request that would start one more is refused at once (429, `TokenReviewsBusy`: not judged), so a
   client sending random tokens cannot multiply TokenReviews against the API server. Each peer address may
   start at most `peer_share.peer_share(max_in_flight)` of them (a quarter) for tokens not known, as kube's
   priority-and-fairness gives each flow a share, so one pod flooding random tokens leaves three quarters of
   the cap to the others (KEDA's token, not known yet after an adapter restart, among them). Rejected tokens
   are cached apart from accepted ones, so such a flood cannot evict the answers of real clients; and a token
   the API server accepted within the last `KNOWN_TOKEN_S` is reviewed again even past the cap and its peer's
   share, so such a flood cannot refuse a real client each time its answer expires either. The reviews past
   the cap are bounded by the valid tokens in use, which a client without credentials cannot add to.

Every authenticated user gets the `system:authenticated` group, as kube's `AuthenticatedGroupAdder` does
(each authenticator adds it: `authenticated_groups`).
No authenticator recognizing the request, or every one that tried failing, is `Unauthenticated` (401);
anonymous access is off. A TokenReview the API server cannot answer is also a 401, as in kube.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import Protocol
from urllib.parse import unquote

from aiohttp import web
from cachetools import LRUCache, TTLCache

from autoscaler.api.client_certs import ClientCertificateInspector
from autoscaler.api.connection_memo import ConnectionMemo
from autoscaler.api.identity import UserInfo
from autoscaler.api.peer_share import PeerCounts
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import TokenReviewResult

log = logging.getLogger(__name__)

AUTHENTICATED_GROUP = "system:authenticated"
CERTIFICATE_METHODS = frozenset({"requestheader", "x509"})
"""Authentication methods whose answer is a function of the connection's certificate and the headers alone."""
KNOWN_TOKEN_S = 900.0
"""How long a token the API server accepted may be reviewed again past the cap on reviews in flight: longer
than any client's pause between requests (KEDA's polling interval, an HPA's sync period)."""
class AuthenticationError(Exception):
    """Credentials were presented but are not valid, or could not be checked."""


class Unauthenticated(Exception):
    """No authenticator accepted the request; the reasons are for the log only."""


class TokenReviewFailed(AuthenticationError):
    """The TokenReview could not be made (the Kubernetes API down, slow, or refusing the adapter: a 403 when its
    ServiceAccount lacks `system:auth-delegator`): the token was not judged. Still a 401, as kube-apiserver's
    `WithAuthentication` answers an authenticator's error, but logged and counted apart from a bad token."""

    def __init__(self, message: str, cause: object) -> None:
        super().__init__(message)
        self.cause = cause
        """What went wrong, to log once per cause: the API's status code, else the kind of error."""


class AuthenticationUnavailable(Exception):
    """No authenticator accepted the request, and a bearer token among its credentials could not be reviewed
    (`TokenReviewFailed`): 401, with a WARNING and `result="error"`."""

    def __init__(self, message: str, failure: TokenReviewFailed) -> None:
        super().__init__(message)
        self.failure = failure


class TokenReviewsBusy(AuthenticationError):
    """A bearer token not reviewed recently, while `max_in_flight` TokenReviews are under way: it was not
    judged, so the answer is kube's 429 with a Retry-After (`AuthenticationBusy`), not a 401 that sent operators
    looking at a token that was fine (KEDA's, after an adapter restart during a random-token flood)."""


class AuthenticationBusy(Exception):
    """No authenticator accepted the request, and a bearer token among its credentials was not judged
    (`TokenReviewsBusy`): answered 429, to be tried again."""


@dataclass(frozen=True, slots=True)
class RequestHeaderRules:
    """The `--requestheader-*` settings (or their values from the extension-apiserver-authentication ConfigMap)."""

    allowed_names: frozenset[str] = frozenset()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()


class Authenticator(Protocol):
    method: str

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        """The user, or None when the request carries no credentials of this kind; AuthenticationError when
        it carries some that are not good."""
        ...


def authenticated_groups(groups: Sequence[str]) -> tuple[str, ...]:
    """Every authenticated user is in `system:authenticated` (kube's `AuthenticatedGroupAdder`)."""
    return tuple(groups) if AUTHENTICATED_GROUP in groups else (*groups, AUTHENTICATED_GROUP)


def _values(request: web.Request, headers: Sequence[str]) -> list[str]:
    return [value for header in headers for value in request.headers.getall(header, ()) if value]


class RequestHeaderAuthenticator:
    method = "requestheader"

    def __init__(self, inspector: ClientCertificateInspector, rules: RequestHeaderRules) -> None:
        self._inspector = inspector
        self.replace_rules(rules)

    def replace_rules(self, rules: RequestHeaderRules) -> None:
        """Judge requests by `rules` from now on (a reload of the ConfigMap: narrowed allowed names, after a
        front-proxy certificate leaked, must not wait for a restart). The caller also renews the inspector's
        generation, so that no connection keeps an identity its headers gave under the old rules."""
        self._rules = rules
        self._prefixes = tuple(prefix.lower() for prefix in rules.extra_headers_prefixes)

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        certificate = self._inspector.inspect(request)
        if certificate is None or not certificate.from_requestheader_ca:
            return None
        allowed = self._rules.allowed_names
        if allowed and certificate.common_name not in allowed:
            raise AuthenticationError(f"front-proxy certificate CN {certificate.common_name!r} is not in "
                                      "--requestheader-allowed-names")
        names = _values(request, self._rules.username_headers)
        if not names:
            return None
        extra: dict[str, list[str]] = {}
        for header, value in request.headers.items():
            lowered = header.lower()
            if not lowered.startswith(self._prefixes):
                continue
            for prefix in self._prefixes:
                if lowered.startswith(prefix) and len(lowered) > len(prefix) and value:
                    extra.setdefault(unquote(lowered[len(prefix):]), []).append(value)
                    break
        uids = _values(request, self._rules.uid_headers) if self._rules.uid_headers else ()
        return UserInfo(
            names[0],
            uids[0] if uids else "",
            authenticated_groups(_values(request, self._rules.group_headers)),
            tuple(sorted((key, tuple(values)) for key, values in extra.items())) if extra else (),
        )


class ClientCertificateAuthenticator:
    method = "x509"

    def __init__(self, inspector: ClientCertificateInspector) -> None:
        self._inspector = inspector

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        certificate = self._inspector.inspect(request)
        if certificate is None or not certificate.from_client_ca or not certificate.common_name:
            return None
        return UserInfo(certificate.common_name, "", authenticated_groups(certificate.organizations))


class TokenReviewer(Protocol):
    async def review_token(self, token: str) -> TokenReviewResult: ...


class TokenAuthenticator:
    method = "token"

    def __init__(self, reviewer: TokenReviewer, ttl_s: float = 10.0, cache_size: int = 16_384,
                 timer: Callable[[], float] = monotonic, max_in_flight: int = 32) -> None:
        self._reviewer = reviewer
        self._accepted: TTLCache[bytes, TokenReviewResult] = TTLCache(cache_size, ttl_s, timer=timer)
        self._rejected: TTLCache[bytes, TokenReviewResult] = TTLCache(cache_size, ttl_s, timer=timer)
        self._known: TTLCache[bytes, None] = TTLCache(cache_size, KNOWN_TOKEN_S, timer=timer)
        """Tokens accepted within `KNOWN_TOKEN_S`, by hash: reviewed again even when the cap is full."""
        self._in_flight: dict[bytes, asyncio.Task[TokenReviewResult]] = {}
        self._max_in_flight = max_in_flight
        self._by_peer = PeerCounts(max_in_flight)
        """Reviews of tokens not known under way, by the peer address whose request started them, and the
        share each may start (`peer_share.peer_share`: a quarter of the cap)."""

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        try:
            encoded = token.encode()
        except UnicodeEncodeError:  # bytes that are not UTF-8 (aiohttp keeps them as surrogates): no token
            raise AuthenticationError("the bearer token is not UTF-8") from None
        key = hashlib.sha256(encoded).digest()
        result = (self._accepted.get(key) or self._rejected.get(key)
                  or await self._review(key, token, request.remote or ""))
        if not result.authenticated:
            raise AuthenticationError(f"invalid bearer token: {result.error or 'not authenticated'}")
        return UserInfo(result.username, result.uid, authenticated_groups(result.groups), result.extra)

    async def _review(self, key: bytes, token: str, peer: str) -> TokenReviewResult:
        """The review of `key`'s token: the one under way (whoever started it), else one started now for
        `peer`; `TokenReviewsBusy` when the token is not known and the cap or `peer`'s share is full."""
        task = self._in_flight.get(key)
        if task is None:
            charged: str | None = None  # the peer whose share this review takes (None: a known token's)
            if key not in self._known:
                if len(self._in_flight) >= self._max_in_flight:
                    raise TokenReviewsBusy(f"{self._max_in_flight} TokenReviews already in flight; not "
                                           "starting another")
                started = self._by_peer.held(peer)
                if started >= self._by_peer.share:
                    raise TokenReviewsBusy(f"{started} TokenReviews of tokens not known already in flight for "
                                           f"{peer or 'this peer'} (its share of {self._max_in_flight}); not "
                                           "starting another")
                self._by_peer.take(peer)
                charged = peer
            task = asyncio.create_task(self._call(key, token))
            self._in_flight[key] = task
            task.add_done_callback(lambda _: self._done(key, charged))
        # shield: one caller giving up (client gone) must not cancel the review the others wait for
        return await asyncio.shield(task)

    def _done(self, key: bytes, charged: str | None) -> None:
        """A review ended: it is no longer in flight, nor part of its peer's share."""
        self._in_flight.pop(key, None)
        if charged is not None:
            self._by_peer.give_back(charged)

    async def _call(self, key: bytes, token: str) -> TokenReviewResult:
        try:
            result = await self._reviewer.review_token(token)
        except KubeApiError as error:
            raise TokenReviewFailed(f"TokenReview failed: {error}", error.cause) from error
        if result.authenticated:
            self._accepted[key] = result
            self._known[key] = None
        else:
            self._rejected[key] = result
            self._known.pop(key, None)  # revoked: no longer reviewed past the cap
        return result


class UnionAuthenticator:
    """Kube's union: the first authenticator to return a user wins; errors are collected, not fatal.

    What the certificate-based authenticators (requestheader, x509) answer depends only on the connection's
    certificate, the CAs and the request's headers, so the answer is kept on the connection (`ConnectionMemo`)
    and `remembered` gives it again, without a coroutine, to the next request with the same headers under the
    same CAs while the certificate is valid. A bearer token's answer is never kept this way: its TokenReview
    expires on its own TTL.

    Equal users are handed out as one object (`USERS_KEPT` of them): the user is half of every authorization
    cache key, and a key whose parts are the very objects of the stored key compares by identity, not field by
    field, in each of the review cache's three dict lookups a request (about 1,500 instructions a request when
    the aggregator's connections each authenticated the HPA on their own: `bench/bench_request_cost.py`)."""

    USERS_KEPT = 4096

    def __init__(self, authenticators: Sequence[Authenticator],
                 inspector: ClientCertificateInspector | None = None) -> None:
        self.authenticators = tuple(authenticators)
        self._inspector = inspector
        self._users: LRUCache[UserInfo, UserInfo] = LRUCache(self.USERS_KEPT)

    def remembered(self, request: web.Request) -> tuple[UserInfo, str] | None:
        """(user, method) as the previous request on this connection, if this one must get the same answer:
        the same headers under the same CAs, and the connection's certificate (`ClientCertificateInspector`'s
        memo, which the authentication that kept the identity made) valid now. `ClientCertificate.valid_at`'s
        test inline: two Python calls and a second read of the protocol were 3,000 instructions of every
        request."""
        protocol = request.protocol
        memo = getattr(protocol, "identity", None)
        inspector = self._inspector
        if memo is None or inspector is None or memo[0] is not inspector.generation or memo[1] != request.raw_headers:
            return None
        certificate = getattr(protocol, "peer_certificate", None)
        if (certificate is not None and (certificate := certificate[1]) is not None
                and certificate.valid_from <= inspector.clock() <= certificate.valid_until):  # `valid_at`
            return memo[2]  # type: ignore[no-any-return]
        return None

    async def authenticate(self, request: web.Request) -> tuple[UserInfo, str]:
        """(user, method); `Unauthenticated` when no authenticator accepted the request."""
        errors: list[str] = []
        busy = False
        failed: TokenReviewFailed | None = None
        for authenticator in self.authenticators:
            try:
                user = await authenticator.authenticate(request)
            except AuthenticationError as error:
                errors.append(f"{authenticator.method}: {error}")
                busy = busy or isinstance(error, TokenReviewsBusy)
                if isinstance(error, TokenReviewFailed):
                    failed = error
                continue
            if user is not None:
                user = self._one_of_equals(user)
                protocol = request.protocol
                if (authenticator.method in CERTIFICATE_METHODS and self._inspector is not None
                        and isinstance(protocol, ConnectionMemo)):
                    protocol.identity = (self._inspector.generation, request.raw_headers,
                                         (user, authenticator.method))
                return user, authenticator.method
        if busy:
            raise AuthenticationBusy("; ".join(errors))
        if failed is not None:
            raise AuthenticationUnavailable("; ".join(errors), failed)
        raise Unauthenticated("; ".join(errors) or "no credentials")

    def _one_of_equals(self, user: UserInfo) -> UserInfo:
        """The object already handed out for a user equal to `user`, else `user` (now kept)."""
        try:
            return self._users[user]
        except KeyError:
            self._users[user] = user
            return user
