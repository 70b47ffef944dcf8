"""Who may call the fake, and the review APIs the adapter asks about its own callers.

- Authentication of requests to the fake: with `require_token` set, a request needs that bearer token or one
  listed in `tokens` (else 401, even with no credentials at all: a server that takes nothing else). The scheme
  is matched in any case ("bearer"), as the server does. Without it, once a kubeconfig was handed out
  (`write_kubeconfig`), a request with no `Authorization` header at all is anonymous, as kube-apiserver with
  `--anonymous-auth` (its default) takes it: user `system:anonymous` may read the health endpoints and
  /version (RBAC's `system:public-info-viewer`) and gets RBAC's 403 Forbidden naming that user for anything
  else, so a client that dropped its credentials fails here as on a cluster. `anonymous_auth = False` is a
  server started with `--anonymous-auth=false`: every such request is 401 Unauthorized. Either way kubectl
  over the fake's plain http is let through (client-go sends credentials only over TLS).
- TokenReview (`authentication.k8s.io/v1`): `tokens` maps a token to (username, groups).
- SubjectAccessReview (`authorization.k8s.io/v1`): decided by `authorizer` when set, else by the RBAC-like
  `access_rules` added with `allow()`; nothing is allowed by default, as RBAC denies by default.
- The aggregator's front-proxy settings in `kube-system/extension-apiserver-authentication`, written the way
  kube-apiserver writes them (`set_authentication_config`).

Reviews are validated like the server validates them and echoed with a `status`; creation answers 201.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from tests.fakes.kube.faults import request_denial
from tests.fakes.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from tests.fakes.kube.store import ObjectStore
from tests.fakes.kube.wire import JSON, ApiError, checked_object, json_response, truthy

AUTH_CONFIGMAP: Final = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True, slots=True)
class AccessRule:
    """An RBAC-like grant; None matches anything. `groups` matches when the subject has any of them."""

    user: str | None = None
    groups: frozenset[str] | None = None
    verb: str | None = None
    group: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path: str | None = None  # for nonResourceAttributes
    reason: str = ""

    def matches(self, spec: JSON) -> bool:
        if self.user is not None and spec.get("user") != self.user:
            return False
        if self.groups is not None and not self.groups.intersection(spec.get("groups") or ()):
            return False
        attributes = spec.get("resourceAttributes")
        if attributes is None:
            attributes = spec.get("nonResourceAttributes") or {}
            if self.group is not None or self.resource is not None or self.namespace is not None:
                return False
            return _wild(self.verb, attributes.get("verb")) and _wild(self.path, attributes.get("path"))
        if self.path is not None:
            return False
        return (
            _wild(self.verb, attributes.get("verb"))
            and _wild(self.group, attributes.get("group", ""))
            and _wild(self.resource, attributes.get("resource"))
            and _wild(self.namespace, attributes.get("namespace", ""))
            and _wild(self.name, attributes.get("name", ""))
        )


def _wild(expected: str | None, actual: Any) -> bool:
    return expected is None or expected == "*" or expected == (actual or "")


Authorizer = Callable[[JSON], bool | tuple[bool, str]]
"""Decides a SubjectAccessReview from its spec: allowed, or (allowed, reason)."""


class AuthReviews(ObjectStore):
    """Bearer-token checks on the fake's own API, TokenReviews, SubjectAccessReviews and the authentication
    ConfigMap."""

    def __init__(self) -> None:
        super().__init__()
        self.require_token: str | None = None
        """When set, requests must carry `Authorization: Bearer <it>` (or a token in `tokens`), else 401."""
        self.credentials_given = False
        """Set by `write_kubeconfig`: clients were given credentials, so a request without any is anonymous."""
        self.anonymous_auth = True
        """kube-apiserver's `--anonymous-auth` (on by default): a request without credentials is `system:anonymous`,
        refused with RBAC's 403 but for the public paths; False: it is 401 Unauthorized."""
        self.tokens: dict[str, tuple[str, list[str]]] = {}
        """TokenReview answers: token -> (username, groups)."""
        self.token_reviews: list[JSON] = []
        """The `spec` of every TokenReview received, in order."""
        self.access_reviews: list[JSON] = []
        """The `spec` of every SubjectAccessReview received, in order."""
        self.access_rules: list[AccessRule] = []
        self.authorizer: Authorizer | None = None
        """When set, decides SubjectAccessReviews instead of `access_rules`: spec -> allowed or (allowed, reason)."""

    # ---- test controls ---------------------------------------------------------------------------------------

    def set_authentication_config(
        self,
        *,
        client_ca: str | None = None,
        requestheader_client_ca: str | None = None,
        allowed_names: Sequence[str] = ("front-proxy-client",),
        username_headers: Sequence[str] = ("X-Remote-User",),
        group_headers: Sequence[str] = ("X-Remote-Group",),
        extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",),
        uid_headers: Sequence[str] | None = None,
    ) -> JSON:
        """Write `kube-system/extension-apiserver-authentication` as kube-apiserver does: PEM bundles under
        `client-ca-file` / `requestheader-client-ca-file` (absent when not configured) and JSON-list strings for
        the rest. `requestheader-uid-headers` exists only on servers started with that flag (1.32+)."""
        data: dict[str, str] = {}
        if client_ca is not None:
            data["client-ca-file"] = client_ca
        if requestheader_client_ca is not None:
            data["requestheader-client-ca-file"] = requestheader_client_ca
        data["requestheader-allowed-names"] = json.dumps(list(allowed_names))
        data["requestheader-extra-headers-prefix"] = json.dumps(list(extra_headers_prefix))
        data["requestheader-group-headers"] = json.dumps(list(group_headers))
        data["requestheader-username-headers"] = json.dumps(list(username_headers))
        if uid_headers is not None:
            data["requestheader-uid-headers"] = json.dumps(list(uid_headers))
        namespace, name = AUTH_CONFIGMAP
        return self.put_object("configmaps", {"metadata": {"name": name, "namespace": namespace}, "data": data})

    def allow(
        self,
        *,
        user: str | None = None,
        groups: Iterable[str] | None = None,
        verb: str | None = None,
        group: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        path: str | None = None,
        reason: str = "",
    ) -> AccessRule:
        """Grant what matches (None or "*" matches anything). With no rule and no `authorizer`, every
        SubjectAccessReview is denied, as RBAC denies by default."""
        rule = AccessRule(
            user,
            frozenset(groups) if groups is not None else None,
            verb,
            group,
            resource,
            namespace,
            name,
            path,
            reason,
        )
        self.access_rules.append(rule)
        return rule

    # ---- internals -------------------------------------------------------------------------------------------

    def _authenticate(self, request: web.Request) -> None:
        if self.require_token is None:
            if self.credentials_given and "Authorization" not in request.headers and not _kubectl_over_http(request):
                if not self.anonymous_auth:
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                if request.path.rstrip("/") not in _PUBLIC_INFO_PATHS:
                    raise request_denial(ANONYMOUS, request.method, request.path, truthy(request.query.get("watch")))
            return
        # The server's bearer-token authenticator takes the scheme in any case: the Python client's in-cluster
        # loader sends "bearer <token>".
        scheme, _, rest = request.headers.get("Authorization", "").strip().partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else None
        if token is None or (token != self.require_token and token not in self.tokens):
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _subject_access_review(self, body: Any) -> web.Response:
        review = checked_object(SUBJECT_ACCESS_REVIEWS, body)
        spec = review.get("spec") or {}
        causes: list[tuple[str, Any, str]] = []
        has_resource = spec.get("resourceAttributes") is not None
        has_non_resource = spec.get("nonResourceAttributes") is not None
        if has_resource and has_non_resource:
            causes.append(
                (
                    "spec.nonResourceAttributes",
                    "set",
                    "cannot be specified in combination with resourceAttributes",
                )
            )
        if not has_resource and not has_non_resource:
            causes.append(
                (
                    "spec.resourceAttributes",
                    None,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if not spec.get("user") and not spec.get("groups"):
            causes.append(("spec.user", "", "at least one of user or group must be specified"))
        if causes:
            raise ApiError.invalid("SubjectAccessReview", "authorization.k8s.io", "", causes)
        self.access_reviews.append(copy.deepcopy(spec))
        allowed, reason = self._decide(spec)
        status: JSON = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        answer = {
            "kind": "SubjectAccessReview",
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return json_response(answer, status=201)

    def _decide(self, spec: JSON) -> tuple[bool, str]:
        if self.authorizer is not None:
            decision = self.authorizer(spec)
            return decision if isinstance(decision, tuple) else (bool(decision), "")
        for index, rule in enumerate(self.access_rules):
            if rule.matches(spec):
                subject = f'User "{spec["user"]}"' if spec.get("user") else f'Group "{(spec.get("groups") or [""])[0]}"'
                reason = rule.reason or (
                    f'RBAC: allowed by ClusterRoleBinding "fake-rule-{index}" of ClusterRole "fake-rule-{index}" '
                    f"to {subject}"
                )
                return True, reason
        return False, ""

    def _token_review(self, body: Any) -> web.Response:
        """An unknown token gets `status: {user: {}, error: ...}` with `authenticated` omitted, as Go's
        `omitempty` drops a false bool; authenticated users get the `system:authenticated` group added."""
        review = checked_object(TOKEN_REVIEWS, body)
        spec = review.get("spec") or {}
        self.token_reviews.append(copy.deepcopy(spec))
        identity = self.tokens.get(spec.get("token") or "")
        status: JSON
        if identity is None:
            status = {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        else:
            username, groups = identity
            all_groups = list(groups) + ([] if "system:authenticated" in groups else ["system:authenticated"])
            status = {
                "authenticated": True,
                "user": {
                    "username": username,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, username)),
                    "groups": all_groups,
                },
            }
            if spec.get("audiences"):
                status["audiences"] = list(spec["audiences"])
        answer = {
            "kind": "TokenReview",
            "apiVersion": TOKEN_REVIEWS.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return json_response(answer, status=201)


ANONYMOUS: Final = "system:anonymous"
"""The user kube-apiserver gives a request without credentials while `--anonymous-auth` is on (its default)."""

_PUBLIC_INFO_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version"})
"""What RBAC's default `system:public-info-viewer` ClusterRole lets `system:anonymous` read."""


def _kubectl_over_http(request: web.Request) -> bool:
    """kubectl over the fake's plain http, which never sends credentials there (a real API server is always TLS,
    where kubectl would send them): taken without credentials although clients were given some."""
    return not request.secure and request.headers.get("User-Agent", "").startswith("kubectl/")
