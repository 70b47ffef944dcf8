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
  looking at a runtime answered 503 an hour later should not need that line. Optional: a source without it
  shows no problems (`source_problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from autoscaler.model import RuntimeKey, RuntimeSnapshot


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod discovery knows of, and where its exporter answers."""

    name: str
    ready: bool
    url: str | None  # the exporter's /metrics URL; None when the pod has no IP yet
    created_at: float | None = None


@dataclass(frozen=True, slots=True)
class RuntimeInventory:
    """One runtime as discovery sees it right now."""

    key: RuntimeKey
    pods: tuple[PodTarget, ...]
    replicas: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)


REASON_DISCOVERY: Final = "discovery"
"""A `SourceProblem`'s reason while pod discovery is out of date: every snapshot is `source_ok=False`."""
DISCOVERY_DETAIL: Final = ("pod discovery is out of date (Kubernetes API unreachable, a watch broken or refused by "
                           "RBAC, or the targets file unreadable); values cannot fall until it recovers: see the "
                           "adapter's log for its error")


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A read that fails right now, as /debug shows it for the runtimes it affects."""

    reason: str
    """The `modelmesh_autoscaler_source_errors_total` reason (`connect`, `timeout`, `tls`, `http`, `parse`,
    `empty`), or `discovery`; or, not errors but why pods lack data, Prometheus's `unseen` and `partial`."""
    detail: str
    """The backend's own words, as the log has them (credentials left out)."""
    since: float
    """Clock time of the first failure of this run of failures (the reason may have changed since)."""
    pod: str | None = None
    """The pod whose exporter fails (the scrape source); None when the source fails as a whole."""


def source_problems(source: object, key: RuntimeKey) -> tuple[SourceProblem, ...]:
    """What `source` says fails now for runtime `key`; () for a source that does not say."""
    problems: Callable[[RuntimeKey], tuple[SourceProblem, ...]] | None = getattr(source, "problems", None)
    return problems(key) if callable(problems) else ()


class DiscoveryOutage:
    """Since when discovery has been unhealthy, for the sources' `problems` (noted once per refresh)."""

    def __init__(self) -> None:
        self.since: float | None = None

    def note(self, healthy: bool, now: float) -> bool:
        """Record discovery's health at `now`; returns `healthy`."""
        if healthy:
            self.since = None
        elif self.since is None:
            self.since = now
        return healthy

    def problems(self) -> tuple[SourceProblem, ...]:
        return () if self.since is None else (SourceProblem(REASON_DISCOVERY, DISCOVERY_DETAIL, self.since),)


class PodDiscovery(Protocol):
    """Keeps an up-to-date inventory of runtimes and their pods."""

    @property
    def healthy(self) -> bool:
        """False while the inventory may be out of date (API unreachable, watch broken)."""
        ...

    async def start(self) -> None:
        """Begin discovery (load a file, start watches); returns once a first inventory exists or failed."""
        ...

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        """The current inventory; cheap, no I/O."""
        ...

    async def close(self) -> None: ...


class MetricSource(Protocol):
    """Reads per-pod signals for every runtime the discovery knows."""

    name: str

    @property
    def errors(self) -> Mapping[str, int]:
        """Failed reads so far, by reason; the refresher exports it as a self-metric."""
        ...

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        """One snapshot per runtime in the inventory; never raises."""
        ...

    async def close(self) -> None: ...
