"""The `authorizer` variable an admission policy's CEL sees, for cel-python: the shape of Kubernetes' CEL
authorization library (k8s.io/apiserver/pkg/cel/library/authz.go), decided by an RBAC-like table of grants.

In a ValidatingAdmissionPolicy `authorizer` asks the cluster's authorizer about the request's user:
`authorizer.group(G).resource(R).namespace(NS).name(N).check(VERB).allowed()`. Each builder step returns a new
check (the library copies its value), `resource('')` is an error, `check` makes the authorization call, and
`allowed()` is true only for an "allow" decision ("no opinion" is false, as RBAC's default deny). The grants
are `AccessRule`s, the fake API's SubjectAccessReview table (tests/fakes/kube/reviews.py), so who may do what
is written the same way for both. Not modelled: `fieldSelector`/`labelSelector` (AccessRule ignores them, as
it ignores a subresource).

cel-python calls a member function `x.f(a)` as `functions['f'](x, a)`: `FUNCTIONS` dispatches each of the
library's names to the receiver's method, for `celpy.Environment().program(ast, functions=FUNCTIONS)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from tests.fakes.kube.reviews import AccessRule


@dataclass(frozen=True, slots=True)
class Decision:
    """`<ResourceCheck>.check(verb)`: what the authorizer decided."""

    allow: bool
    why: str

    def allowed(self) -> celtypes.BoolType:
        return celtypes.BoolType(self.allow)

    def reason(self) -> celtypes.StringType:
        return celtypes.StringType(self.why)

    def errored(self) -> celtypes.BoolType:
        return celtypes.BoolType(False)

    def error(self) -> celtypes.StringType:
        return celtypes.StringType("")


@dataclass(frozen=True, slots=True)
class ResourceCheck:
    """`authorizer.group(G).resource(R)`, narrowed by `subresource`, `namespace` and `name` (each a copy)."""

    authorizer: CelAuthorizer
    group_name: str
    resource_name: str
    subresource_name: str = ""
    namespace_name: str = ""
    object_name: str = ""

    def subresource(self, subresource: str) -> ResourceCheck:
        return replace(self, subresource_name=str(subresource))

    def namespace(self, namespace: str) -> ResourceCheck:
        return replace(self, namespace_name=str(namespace))

    def name(self, name: str) -> ResourceCheck:
        return replace(self, object_name=str(name))

    def check(self, verb: str) -> Decision:
        """The authorization call: the attributes a SubjectAccessReview would carry, asked of the grants."""
        review = {"user": self.authorizer.user, "groups": list(self.authorizer.groups), "resourceAttributes": {
            "verb": str(verb), "group": self.group_name, "resource": self.resource_name,
            "subresource": self.subresource_name, "namespace": self.namespace_name, "name": self.object_name}}
        for rule in self.authorizer.rules:
            if rule.matches(review):
                return Decision(True, rule.reason)
        return Decision(False, "")


@dataclass(frozen=True, slots=True)
class GroupCheck:
    """`authorizer.group(G)`."""

    authorizer: CelAuthorizer
    group_name: str

    def resource(self, resource: str) -> ResourceCheck | CELEvalError:
        if not str(resource).strip():
            return CELEvalError("resource must not be empty")
        return ResourceCheck(self.authorizer, self.group_name, str(resource))


@dataclass(frozen=True, slots=True)
class CelAuthorizer:
    """The `authorizer` variable for the request's user (`user`, `groups`), deciding by `rules` (any match
    allows; none: RBAC's default deny)."""

    user: str
    groups: tuple[str, ...]
    rules: Sequence[AccessRule]

    def group(self, group: str) -> GroupCheck:
        return GroupCheck(self, str(group))

    def serviceAccount(self, namespace: str, name: str) -> CelAuthorizer:  # the library's name
        return replace(self, user=f"system:serviceaccount:{namespace}:{name}",
                       groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                               "system:authenticated"))


def _method(name: str) -> Any:
    def call(receiver: Any, *args: Any) -> Any:
        method = getattr(receiver, name, None)
        if method is None:
            return CELEvalError(f"no such overload: {type(receiver).__name__}.{name}")
        return method(*args)
    return call


FUNCTIONS = {name: _method(name) for name in (
    "group", "serviceAccount", "resource", "subresource", "namespace", "name", "check",
    "allowed", "reason", "errored", "error",
)}
"""The library's member functions, each calling the receiver's method of that name."""
