"""The resource types the fake serves: the one table to extend when a test needs another kind.

A `ResourceType` row carries everything generic code needs: its URL (group, version, plural), the names
`kubectl` and errors use, discovery's verbs and categories, and the registry-strategy flags that change how
writes behave. Routing (`parse_path`), discovery, storage, watches and generic writes all read this table, so
a plain new kind is one row in `RESOURCE_TYPES`; only behaviour no flag describes (a derived status, a
validation) needs code elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tests.fakes.kube.wire import JSON


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource, with the registry-strategy flags that change how writes behave."""

    group: str
    version: str
    plural: str
    kind: str
    singular: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    unconditional_update: bool = True  # PUT without resourceVersion allowed (leases: no)
    create_on_update: bool = False  # PUT of a missing object creates it (leases: yes)
    status_subresource: bool = False  # writes to the main resource keep the old status
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    stored: bool = True  # reviews are create-only and never stored
    tracks_generation: bool = False  # metadata.generation starts at 1 and counts changes of `spec`
    categories: tuple[str, ...] = ()  # discovery categories: "all" puts the kind in `kubectl get all`

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The group-qualified resource as errors spell it: `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str) -> JSON:
        """`Status.details` of an error about one object of this type."""
        details: JSON = {"name": name}
        if self.group:
            details["group"] = self.group
        details["kind"] = self.plural
        return details


PODS: Final = ResourceType(
    "", "v1", "pods", "Pod", "pod", short_names=("po",), status_subresource=True, categories=("all",)
)
CONFIGMAPS: Final = ResourceType("", "v1", "configmaps", "ConfigMap", "configmap", short_names=("cm",))
DEPLOYMENTS: Final = ResourceType(
    "apps",
    "v1",
    "deployments",
    "Deployment",
    "deployment",
    short_names=("deploy",),
    status_subresource=True,
    tracks_generation=True,
    categories=("all",),
)
LEASES: Final = ResourceType(
    "coordination.k8s.io", "v1", "leases", "Lease", "lease", unconditional_update=False, create_on_update=True
)
SUBJECT_ACCESS_REVIEWS: Final = ResourceType(
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    "SubjectAccessReview",
    "subjectaccessreview",
    namespaced=False,
    verbs=("create",),
    stored=False,
)
TOKEN_REVIEWS: Final = ResourceType(
    "authentication.k8s.io",
    "v1",
    "tokenreviews",
    "TokenReview",
    "tokenreview",
    namespaced=False,
    verbs=("create",),
    stored=False,
)

RESOURCE_TYPES: Final = (PODS, CONFIGMAPS, DEPLOYMENTS, LEASES, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS)
"""Every served type, in discovery order."""

_BY_PATH: Final = {(t.group, t.version, t.plural): t for t in RESOURCE_TYPES}


def resource_type(name: str) -> ResourceType:
    """The type a test control names by plural, group-qualified plural, singular or short name (KeyError if
    none), as `kubectl` resolves resource arguments."""
    for rtype in RESOURCE_TYPES:
        if name in (rtype.plural, rtype.qualified, rtype.singular, *rtype.short_names):
            return rtype
    raise KeyError(name)


ResourcePath = tuple[ResourceType, str | None, str | None, str | None]
"""(type, namespace, name, subresource) addressed by a URL path."""


def parse_path(path: str) -> ResourcePath | None:
    """What a resource path addresses, or None when it names no served type."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    rtype = _BY_PATH.get((group, version, rest[0]))
    if rtype is None:
        return None
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    return rtype, namespace, name, subresource
