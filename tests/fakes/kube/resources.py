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

from tests.fakes.kube.wire import JSON, ApiError

_METADATA_FIELDS: Final = ("metadata.name", "metadata.namespace")
POD_FIELD_LABELS: Final = (
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
    "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
)
"""The pod fields a field selector may name besides metadata.name and metadata.namespace, as the server's
conversion for Pod lists them (pkg/apis/core/v1/conversion.go; `spec.host` is read as `spec.nodeName`)."""
_FIELD_ALIASES: Final = {"spec.host": "spec.nodeName", "status.podIPs": "status.podIPs.0.ip"}


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """A CRD's `subresources.scale`: dotted paths (no arrays) into the custom object, as the CRD spells them."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"


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
    scale: ScalePaths | None = None  # a CRD's `scale` subresource (autoscaling/v1 Scale), None: not served
    field_labels: tuple[str, ...] | None = None
    """Fields a field selector may name besides metadata.*, for a built-in kind with its own conversion (pods);
    None: the default conversion, metadata.name and metadata.namespace only (deployments, leases, ...)."""
    custom: bool = False  # a custom resource: served by apiextensions-apiserver (patch types, field selectors)

    @property
    def subresources(self) -> tuple[str, ...]:
        """The subresources served under `.../{name}/`: `status` and `scale` where the type has them."""
        return (("status",) if self.status_subresource else ()) + (("scale",) if self.scale else ())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The group-qualified resource as errors spell it: `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def field_path(self, label: str) -> tuple[str, ...]:
        """Where a field selector's `label` reads in an object, or the server's 400 for a field it does not
        convert for this kind (`ConvertFieldLabel`; the message is the one the kind's conversion writes)."""
        if self.custom:
            supported: tuple[str, ...] = _METADATA_FIELDS if self.namespaced else ("metadata.name",)
            message = f"field label not supported: {label}"
        elif self.field_labels is None:
            supported = _METADATA_FIELDS
            message = f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        else:
            supported = (*_METADATA_FIELDS, *self.field_labels, *_FIELD_ALIASES)
            message = f"field label not supported: {label}"
        if label not in supported:
            raise ApiError.bad_request(message)
        return tuple(_FIELD_ALIASES.get(label, label).split("."))

    def details(self, name: str) -> JSON:
        """`Status.details` of an error about one object of this type."""
        details: JSON = {"name": name}
        if self.group:
            details["group"] = self.group
        details["kind"] = self.plural
        return details


PODS: Final = ResourceType(
    "", "v1", "pods", "Pod", "pod", short_names=("po",), status_subresource=True, categories=("all",),
    field_labels=POD_FIELD_LABELS,
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
HORIZONTAL_POD_AUTOSCALERS: Final = ResourceType(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    "horizontalpodautoscaler",
    short_names=("hpa",),
    status_subresource=True,
    categories=("all",),
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

# KServe's runtimes, as modelmesh-serving installs their CRDs (config/crd/bases): no subresources at all.
SERVING_RUNTIMES: Final = ResourceType(
    "serving.kserve.io", "v1alpha1", "servingruntimes", "ServingRuntime", "servingruntime", tracks_generation=True,
    custom=True,
)
CLUSTER_SERVING_RUNTIMES: Final = ResourceType(
    "serving.kserve.io",
    "v1alpha1",
    "clusterservingruntimes",
    "ClusterServingRuntime",
    "clusterservingruntime",
    namespaced=False,
    tracks_generation=True,
    custom=True,
)
# The adapter's own CRD (manifests/base/custom-resource-definition-runtimescales.yaml): status and scale.
RUNTIME_SCALES: Final = ResourceType(
    "autoscaler.modelmesh.io",
    "v1alpha1",
    "runtimescales",
    "RuntimeScale",
    "runtimescale",
    short_names=("rts",),
    status_subresource=True,
    tracks_generation=True,
    categories=("modelmesh",),
    scale=ScalePaths(),
    custom=True,
)

RESOURCE_TYPES: Final = (
    PODS,
    CONFIGMAPS,
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    LEASES,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    SERVING_RUNTIMES,
    CLUSTER_SERVING_RUNTIMES,
    RUNTIME_SCALES,
)
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
