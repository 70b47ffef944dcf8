"""What pod discovery reads from pods and Deployments, and how it joins them into an inventory.

Pure functions of the API's raw JSON (see `autoscaler.kube.raw`), so a malformed field can never break discovery:
it reads as absent. A runtime is a Deployment (docs/design.md); its pods are the ones its selector
(`spec.selector.matchLabels`; ModelMesh uses `modelmesh-service` and `name`) matches in its namespace.

A pod is Ready when its `Ready` condition is True and it is not terminating (no `deletionTimestamp`): the
ReplicaSet counts a terminating pod as gone, so must we. Its exporter is `http://<podIP>:<exporter_port>/metrics`,
unless its containers declare ports and not that one: the pod runs no exporter sidecar (a runtime modelmesh-serving
runs that was never given one), and scraping it would only count a connection refused at every refresh.

Over which scheme, each pod says by the name it declares the exporter port under, as Istio and kube-rbac-proxy
read port names: `https` or `https-...` (the TLS patch's `https-exporter`) over https, any other name (the plain
patch's `exporter`) or none over http (`scheme_of`). So the pods of a runtime half rolled to a TLS sidecar are
each scraped as they serve: one scheme for every pod failed every pod not rolled yet, for the whole migration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from autoscaler.kube.raw import JSON
from autoscaler.kube.timestamps import posix_seconds
from autoscaler.model import RuntimeKey
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.policies.slots import slot_builder
from autoscaler.sources.base import PodTarget, RuntimeInventory

MODELMESH_NAME_LABEL: Final = "name"
"""ModelMesh pods carry `name=<Deployment name>`: the selector used when a Deployment cannot be read."""


@dataclass(frozen=True, slots=True)
class PodRecord:
    """The fields of a pod that discovery uses."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ready: bool
    ip: str | None
    created_at: float | None
    terminating: bool = False
    deployment: str | None = None
    """The Deployment that runs the pod, by its controlling ReplicaSet (`<deployment>-<pod-template-hash>`);
    None for a pod no Deployment runs."""
    declared_ports: frozenset[int] | None = None
    """The `containerPort`s its containers declare; None when they declare none (declaring is optional, so
    then nothing is known about which ports answer)."""
    controlled: bool = False
    """Whether a controller owns it (`ownerReferences` with `controller: true`); with `deployment` None, one
    that is no Deployment's ReplicaSet (another kind, or not named for the pod's template hash)."""
    uid: str | None = None
    """`metadata.uid`: which pod of the name it is (`PodTarget.uid`)."""
    https_ports: frozenset[int] = frozenset()
    """Those of `declared_ports` declared under a name that says HTTPS (`names_https`): served over TLS."""
    unready_since: float | None = None
    """When the pod, seen Ready before by the watch, stopped being Ready (`PodTarget.unready_since`): the watch
    sets it as it sees the change (`after_readiness_change`), from `ready_changed_at`."""
    ready_changed_at: float | None = None
    """Its Ready condition's `lastTransitionTime` (the kubelet's clock, whole seconds); None when absent."""


@dataclass(slots=True)
class RuntimeRecord:
    """What the last Deployment read said about one runtime."""

    key: RuntimeKey
    selector: dict[str, str]
    replicas: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str | None = None
    """The Deployment's `metadata.uid` (None: no Deployment read, a configured runtime without one)."""
    deleting: bool = False
    """The Deployment carries a `metadata.deletionTimestamp`: it is being deleted, and stays readable meanwhile
    where its dependents go first (foreground cascading deletion: `finalizers: [foregroundDeletion]`)."""


def parse_pod(obj: Any) -> PodRecord | None:
    """The fields discovery needs, or None for an object that is not a usable pod."""
    metadata = _mapping(_mapping(obj).get("metadata"))
    status = _mapping(_mapping(obj).get("status"))
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    labels = {str(k): str(v) for k, v in _mapping(metadata.get("labels")).items()}
    terminating = metadata.get("deletionTimestamp") is not None
    conditions = status.get("conditions")
    ready_condition = next((c for c in conditions if _mapping(c).get("type") == "Ready"), None) if isinstance(
        conditions, list) else None
    ready = not terminating and ready_condition is not None and ready_condition.get("status") == "True"
    ip = status.get("podIP")
    controller = _controller(metadata)
    ports, https_ports = _declared_ports(_mapping(_mapping(obj).get("spec")))
    return PodRecord(
        name,
        namespace,
        labels,
        ready,
        ip if isinstance(ip, str) and ip else None,
        posix_seconds(metadata.get("creationTimestamp")),
        terminating,
        _owning_deployment(controller, labels),
        ports,
        controller is not None,
        uid if isinstance(uid := metadata.get("uid"), str) and uid else None,
        https_ports,
        ready_changed_at=posix_seconds(ready_condition.get("lastTransitionTime")) if ready_condition else None,
    )


def after_readiness_change(old: PodRecord | None, new: PodRecord, now: float,
                           lost_at: float | None = None) -> PodRecord:
    """`new`, with when it stopped being Ready where the watch saw it Ready before (`old`, the same pod: same
    uid): set when it goes from Ready to not, kept while it stays not Ready, dropped once it is Ready again or
    terminating (the ReplicaSet counts a terminating pod as gone). A pod never seen Ready (starting, or not
    Ready when the adapter started) gets none: the watch cannot tell it ever served. Dropped at Ready is not the
    spell's end: the decision (`policies.unready_pods`) keeps its clock until the pod reports fresh data, so a
    crash-looping pod Ready for seconds between restarts does not start its 5 minutes over (with either source).

    When it stopped is `now`, as the watch sees the change. A change that reaches it late, caught up after the
    watch lost touch at `lost_at`, happened at its Ready condition's `lastTransitionTime` (at most `now`): timed
    from the catch-up, the pod was held as much longer as the outage lasted. That time is the kubelet's clock,
    so it is never taken as earlier than `lost_at`: a node clock minutes behind (or a pod long Pending before its
    first start) read a pod that failed its probe just now as not Ready for minutes already, past the hold."""
    if new.ready or new.terminating or old is None or old.uid != new.uid:
        return new
    if not old.ready:
        since = old.unready_since
    elif lost_at is None or new.ready_changed_at is None:
        since = now
    else:
        since = max(lost_at, min(now, new.ready_changed_at))
    return new if since is None else replace(new, unready_since=since)


def _controller(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with `controller: true` (Kubernetes allows one), or None."""
    owners = metadata.get("ownerReferences")
    return next((owner for owner in map(_mapping, owners if isinstance(owners, list) else ())
                 if owner.get("controller") is True), None)


def _declared_ports(spec: Mapping[str, Any]) -> tuple[frozenset[int] | None, frozenset[int]]:
    """The `containerPort`s the containers declare (None: none), and those of them named for HTTPS."""
    declared = [(number, _mapping(port).get("name"))
                for container in _list(spec.get("containers"))
                for port in _list(_mapping(container).get("ports"))
                if isinstance(number := _mapping(port).get("containerPort"), int)]
    https = frozenset(number for number, name in declared if isinstance(name, str) and names_https(name))
    return frozenset(number for number, _ in declared) or None, https


def names_https(port_name: str) -> bool:
    """Whether a declared port's name says it serves HTTPS: `https`, or `https-` and a suffix, the protocol
    prefix Istio reads from port names (and kube-rbac-proxy's `https`). A name is lower case (IANA_SVC_NAME);
    `httpsx` names no protocol."""
    return port_name == "https" or port_name.startswith("https-")


def scheme_of(pod: PodRecord, exporter_port: int, scheme: str) -> str:
    """The scheme a pod's exporter is scraped over: `scheme` when it forces one (`--exporter-scheme http` or
    `https`, for pods that declare no ports), else (`auto`) the one the exporter port's declared name says."""
    if scheme != "auto":
        return scheme
    return "https" if exporter_port in pod.https_ports else "http"


def _owning_deployment(controller: Mapping[str, Any] | None, labels: Mapping[str, str]) -> str | None:
    """The Deployment of a pod whose controller is a ReplicaSet named `<deployment>-<pod-template-hash>`, the
    name the Deployment controller gives every ReplicaSet it makes."""
    template_hash = labels.get("pod-template-hash")
    if not template_hash or controller is None or controller.get("kind") != "ReplicaSet":
        return None
    name = controller.get("name")
    if not isinstance(name, str):
        return None
    deployment, dash, suffix = name.rpartition("-")
    return deployment if dash and deployment and suffix == template_hash else None


def deletion_cost_of(obj: Any) -> str | None:
    """A pod object's `controller.kubernetes.io/pod-deletion-cost` annotation, or None."""
    cost = _mapping(_mapping(_mapping(obj).get("metadata")).get("annotations")).get(DELETION_COST_ANNOTATION)
    return cost if isinstance(cost, str) else None


def deployment_key(deployment: Any) -> RuntimeKey | None:
    """The runtime a listed Deployment is, or None when it lacks a name or namespace."""
    metadata = _mapping(_mapping(deployment).get("metadata"))
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if isinstance(name, str) and isinstance(namespace, str):
        return RuntimeKey(namespace, name)
    return None


def parse_deployment(deployment: JSON, key: RuntimeKey) -> RuntimeRecord:
    """Selector, replicas and annotations of runtime `key` from its Deployment."""
    metadata = _mapping(deployment.get("metadata"))
    spec = _mapping(deployment.get("spec"))
    match_labels = _mapping(_mapping(spec.get("selector")).get("matchLabels"))
    selector = {str(k): str(v) for k, v in match_labels.items()} or fallback_selector(key)
    replicas = spec.get("replicas", 1)  # the API defaults an unset replicas to 1
    annotations = {str(k): str(v) for k, v in _mapping(metadata.get("annotations")).items()}
    uid = metadata.get("uid")
    return RuntimeRecord(key, selector, replicas if isinstance(replicas, int) else None, annotations,
                         uid if isinstance(uid, str) else None, metadata.get("deletionTimestamp") is not None)


def fallback_selector(key: RuntimeKey) -> dict[str, str]:
    """Without a readable `matchLabels`, select ModelMesh's own pod label for the Deployment (never all pods)."""
    return {MODELMESH_NAME_LABEL: key.deployment}


def runtime_table(runtimes: Mapping[RuntimeKey, RuntimeRecord]) -> dict[RuntimeKey, tuple[Any, ...]]:
    """The runtimes as comparable values: equal tables mean a Deployment read changed nothing."""
    return {
        key: (tuple(sorted(r.selector.items())), r.replicas, tuple(sorted(r.annotations.items())), r.uid,
              r.deleting)
        for key, r in runtimes.items()
    }


def build_inventory(
    runtimes: Mapping[RuntimeKey, RuntimeRecord], pods: Iterable[PodRecord], exporter_port: int,
    scheme: str = "auto",
) -> dict[RuntimeKey, RuntimeInventory]:
    """Every runtime with the pods its selector matches in its namespace, both in name order; each pod's exporter
    at `SCHEME://IP:exporter_port/metrics`, the scheme its port's name says or the one `scheme` forces
    (`scheme_of`, `--exporter-scheme`).

    modelmesh-serving puts a namespace's runtimes side by side, so testing every pod of the namespace against
    every runtime's selector costs runtimes x pods: 15 s of CPU at 2,000 runtimes of 2 pods, quadratic, and
    it runs after every pod change. So each runtime tests only the pods that may be its own (`_NamespacePods`):
    those its Deployment's ReplicaSets control, and of the pods no controller owns, those with the rarest of its
    selector's labels. One label chosen the same way for every runtime (ModelMesh's `name`, else the selector's
    first key) let a tenant whose runtimes all share their first label (`{a: x, z: <i>}`) make it quadratic
    again: 5 s a rebuild at 3,000 such Deployments and 3,000 pods."""
    by_namespace: dict[str, _NamespacePods] = {}
    for pod in pods:
        found = by_namespace.get(pod.namespace)
        if found is None:
            found = by_namespace[pod.namespace] = _NamespacePods()
        found.add(pod)
    nothing = _NamespacePods()
    result: dict[RuntimeKey, RuntimeInventory] = {}
    for key in sorted(runtimes):
        runtime = runtimes[key]
        targets = sorted(
            (_target(pod, exporter_port, scheme)
             for pod in by_namespace.get(key.namespace, nothing).candidates(key.deployment, runtime.selector)
             if _selects(runtime.selector, pod)),
            key=lambda target: target.name,
        )
        result[key] = RuntimeInventory(key, tuple(targets), runtime.replicas, dict(runtime.annotations), runtime.uid,
                                       runtime.deleting)
    return result


_FEW_ENOUGH: Final = 8
"""Orphans few enough to test against a selector without indexing its other labels to find fewer."""


class _NamespacePods:
    """A namespace's pods, indexed so that each runtime finds the pods that may be its own in about as many
    steps as there are.

    A runtime's pods are those its Deployment runs, or may: its ReplicaSet controls them, or nothing does (a
    ReplicaSet adopts an orphan its selector matches). A pod another controller owns is never the runtime's,
    however its labels match (a canary with the runtime's labels): a ReplicaSet counts and removes only the
    pods it controls, so counting it put another workload's load into the runtime's values, and the adapter
    wrote its deletion cost over the other workload's. So the controlled pods are kept by Deployment (and a
    pod another kind of controller owns by none), and an orphan is found through one label of the selector:
    the one the fewest orphans have, each label key indexed the first time a selector asks for it."""

    __slots__ = ("_by_label", "_orphans", "_run_by")

    def __init__(self) -> None:
        self._run_by: dict[str, list[PodRecord]] = {}
        self._orphans: list[PodRecord] = []
        self._by_label: dict[str, dict[str, list[PodRecord]]] = {}  # label key -> value -> orphans with it

    def add(self, pod: PodRecord) -> None:
        if not pod.controlled:
            self._orphans.append(pod)
        elif pod.deployment is not None:
            self._run_by.setdefault(pod.deployment, []).append(pod)

    def candidates(self, deployment: str, selector: Mapping[str, str]) -> Sequence[PodRecord]:
        """The pods that runtime `deployment` runs or may adopt, among them every one its selector selects."""
        run = self._run_by.get(deployment, ())
        orphans = self._orphans_for(selector) if self._orphans else ()
        return orphans if not run else run if not orphans else [*run, *orphans]

    def _orphans_for(self, selector: Mapping[str, str]) -> Sequence[PodRecord]:
        """The orphans with the selector's rarest label (all of them for an empty selector), looked for no
        further once few enough; ModelMesh's `name` (one value per runtime) first, as it likely is at once."""
        rarest: Sequence[PodRecord] = self._orphans
        name = selector.get(MODELMESH_NAME_LABEL)
        if name is not None:
            rarest = self._values_of(MODELMESH_NAME_LABEL).get(name, ())
            if len(rarest) <= _FEW_ENOUGH:
                return rarest
        for label, value in selector.items():
            with_label = self._values_of(label).get(value, ())
            if len(with_label) < len(rarest):
                rarest = with_label
                if len(rarest) <= _FEW_ENOUGH:
                    break
        return rarest

    def _values_of(self, label: str) -> dict[str, list[PodRecord]]:
        by_value = self._by_label.get(label)
        if by_value is None:
            by_value = self._by_label[label] = {}
            for pod in self._orphans:
                value = pod.labels.get(label)
                if value is not None:
                    by_value.setdefault(value, []).append(pod)
        return by_value


def _list(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else empty."""
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else empty: a malformed field must not break discovery."""
    return value if isinstance(value, dict) else {}


def _selects(selector: Mapping[str, str], pod: PodRecord) -> bool:
    return all(pod.labels.get(key) == value for key, value in selector.items())


_pod_target: Final = slot_builder(
    PodTarget, ("name", "ready", "url", "created_at", "undeclared_exporter_port", "uid", "unready_since"))
"""`PodTarget` built for every pod at every inventory rebuild: through its `__init__` (a frozen dataclass's, a
keyword argument) the pods' uid made a rebuild of 10,000 pods 8% dearer (`bench/bench_discovery.py`)."""


def _target(pod: PodRecord, exporter_port: int, scheme: str) -> PodTarget:
    if pod.declared_ports is not None and exporter_port not in pod.declared_ports:
        return _pod_target(pod.name, pod.ready, None, pod.created_at, exporter_port, pod.uid, pod.unready_since)
    url = None
    if pod.ip:
        host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
        url = f"{scheme_of(pod, exporter_port, scheme)}://{host}:{exporter_port}/metrics"
    return _pod_target(pod.name, pod.ready, url, pod.created_at, None, pod.uid, pod.unready_since)
