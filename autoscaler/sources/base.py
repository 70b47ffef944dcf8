"""The two seams of the data path: where pods are found, and where their signals are read.

`PodDiscovery` says which runtimes exist and which pods (Ready or not, with their addresses) belong to each:
from a static targets file or from the Kubernetes API. `MetricSource` turns that inventory into one
`RuntimeSnapshot` per runtime each refresh: by scraping exporters, or by querying Prometheus.

Rules every implementation keeps (docs/design.md, Missing data):
- `collect()` never raises. A backend failure is reported as `source_ok=False` on the snapshots it affects
  and is logged by the source; it is never turned into zero load.
- A pod whose read failed keeps its last good `PodSample` (with its old `sampled_at`), so the policies can
  see that it is stale rather than idle.
- A source may say what is failing right now (`problems(key)`: `SourceProblem`s, the backend's words and since
  when), which /debug shows for the runtime: the log says it once, when the failure starts, and an operator
  looking at a runtime answered 503 an hour later should not need that line. A source without any says so
  through `SourceDefaults` (no problems). Defined in `autoscaler.source_problems`, which the API reads too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from autoscaler.model import PodSample, PodUrls, RuntimeKey, RuntimeSnapshot
from autoscaler.source_problems import (  # re-exported: the sources' seam
    REASON_DISCOVERY,
    DiscoveryOutage,
    SourceProblem,
    discovery_problems,
    source_problems,
)

__all__ = ["ALL_NAMESPACES", "REASON_DISCOVERY", "DiscoveryOutage", "DiscoveryScopes", "MetricSource", "PodDiscovery",
           "PodTarget", "RuntimeInventory", "SourceDefaults", "SourceProblem", "discovery_problems",
           "ongoing_problem", "source_problems"]

ALL_NAMESPACES: Final = "*"
"""The scope of a discovery of every namespace (no `--namespaces`) in `DiscoveryScopes.scope_health`: no
namespace can be named so, and an empty label value would be no label at all once Prometheus stores it."""


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod discovery knows of, and where its exporter answers."""

    name: str
    ready: bool
    url: str | None  # the exporter's /metrics URL; None when the pod has no IP yet, or runs no exporter
    created_at: float | None = None
    undeclared_exporter_port: int | None = None
    """The exporter's port, where the pod's containers declare ports and not this one: it runs no exporter
    sidecar, so it is not scraped (a `no_exporter` problem in /debug, not a source error)."""
    uid: str | None = None
    """The pod's `metadata.uid` (Kubernetes discovery; None in a targets file): a pod created again under the
    same name, even in the same second, is another pod, whose readings are its own."""
    unready_since: float | None = None
    """When the pod, seen Ready before by this discovery, stopped being Ready; None while Ready, when never seen
    Ready (starting), or terminating (`PodSample.unready_since`). A targets file lists Ready pods only."""


@dataclass(frozen=True, slots=True)
class RuntimeInventory:
    """One runtime as discovery sees it right now."""

    key: RuntimeKey
    pods: tuple[PodTarget, ...]
    replicas: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str | None = None
    """The Deployment's uid (Kubernetes discovery): a new one under the same name is another runtime."""
    deleting: bool = False
    """Its Deployment is being deleted (`RuntimeSnapshot.deleting`)."""

    def snapshot(self, pods: tuple[PodSample, ...], taken_at: float, source_ok: bool,
                 models_unread: bool, discovery_ok: bool = True) -> RuntimeSnapshot:
        """The refresh's snapshot of this runtime, with what discovery says of it (replicas, annotations, uid,
        deletion, whether it is current: `discovery_ok`, which `source_ok` must include): one place for every
        source, so that a field added to both is copied by each. The snapshot gets its own copy of the annotations:
        what discovery does with its inventory later is not the refresh's."""
        return RuntimeSnapshot(
            key=self.key,
            pods=pods,
            taken_at=taken_at,
            source_ok=source_ok and discovery_ok,
            discovery_ok=discovery_ok,
            replicas=self.replicas,
            annotations=dict(self.annotations),
            uid=self.uid,
            deleting=self.deleting,
            models_unread=models_unread,
        )


class PodDiscovery(Protocol):
    """Keeps an up-to-date inventory of runtimes and their pods."""

    def healthy_for(self, namespace: str) -> bool:
        """False while what the inventory says of `namespace`'s runtimes may be out of date: the sources hold
        those runtimes (`source_ok=False`), and only those, so one namespace's outage (its RoleBinding missing)
        holds no other namespace's runtimes. Cheap, no I/O: asked once per namespace per refresh."""
        ...

    async def start(self) -> None:
        """Begin discovery (load a file, start watches); returns once a first inventory exists or failed."""
        ...

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        """The current inventory; cheap, no I/O."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class DiscoveryScopes(Protocol):
    """Optional for a `PodDiscovery`: one that watches the cluster says, per scope it watches, whether what it
    knows there is current (Kubernetes discovery; a targets file has no scopes). Published as
    `modelmesh_autoscaler_discovery_healthy`, so that a namespace whose runtimes never appeared (its Deployments
    refused from the start) is named by an alert, not only the runtimes that show as unknown."""

    def scope_health(self) -> dict[str, bool]:
        """Each watched namespace (`ALL_NAMESPACES` for a watch of all) and whether discovery there is current;
        the same scopes every call. Cheap, no I/O: asked once per refresh."""
        ...


class MetricSource(Protocol):
    """Reads per-pod signals for every runtime the discovery knows.

    Besides reading, a source says what the self-metrics and /debug show of it: each is declared here, so that a
    renamed one is a type error rather than a self-metric or a /debug field that silently stops. A source that has
    nothing to say for one inherits `SourceDefaults`' answer (0, none)."""

    name: str

    @property
    def errors(self) -> Mapping[str, int]:
        """Failed reads so far, by reason; the refresher exports it as a self-metric."""
        ...

    @property
    def reads(self) -> int:
        """Reads sent so far, failed or not (`modelmesh_autoscaler_source_reads_total`); the scrape source counts
        them, and a source that does not stays at 0."""
        ...

    @property
    def partial_answers(self) -> int:
        """Answers so far that said they left some series out (`modelmesh_autoscaler_source_partial_answers_total`);
        only Prometheus gives such answers."""
        ...

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """What fails now in reading runtime `key`, for /debug (the module's docstring says why); cheap, no I/O."""
        ...

    def scrape_urls(self, key: RuntimeKey) -> PodUrls | None:
        """The runtime's pods' URLs as last scraped, for /debug; None from a source that scrapes nothing itself
        (Prometheus, the simulator): /debug then has no `scrape_url`, rather than a null that would read as
        "not scraped". Asked once a refresh by the /debug render."""
        ...

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        """One snapshot per runtime in the inventory; never raises."""
        ...

    async def close(self) -> None: ...


def ongoing_problem(before: SourceProblem | None, reason: str, detail: str, now: float,
                    pod: str | None = None) -> SourceProblem:
    """The problem a read has now (`reason`, `detail`), dated from the first of its run (`before`, the one it had
    at the last read; None: it starts `now`): /debug says since when a pod fails, not since the last refresh, and
    a reason that changes mid-run (refused, then a timeout) keeps the run's start."""
    return SourceProblem(reason, detail, now if before is None else before.since, pod)


class SourceDefaults:
    """The answers of a `MetricSource` that has nothing to say for some of what the protocol asks: no reads of
    its own counted, no partial answers, no problems, no URLs. A source inherits it and overrides what it has."""

    reads: int = 0

    @property
    def partial_answers(self) -> int:
        return 0

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        return ()

    def scrape_urls(self, key: RuntimeKey) -> PodUrls | None:
        return None

    @staticmethod
    def _note_discovery(outage: DiscoveryOutage, discovery: PodDiscovery, runtimes: Iterable[RuntimeKey],
                        now: float) -> None:
        """Note in `outage`, once a refresh and before any snapshot asks it, where `discovery` is out of date for
        the namespaces of `runtimes` (the inventory's), with discovery's own words for /debug: a source holds
        those runtimes (`source_ok=False`), never the fleet, whichever backend reads them."""
        outage.note(discovery.healthy_for, (key.namespace for key in runtimes), now, discovery_problems(discovery))
