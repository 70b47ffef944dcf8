"""The data the adapter's parts hand each other: what a source saw, and what the policies decided.

Sources produce `RuntimeSnapshot`s; the pure policies (aggregation, recommendation, smoothing, ranking) turn
them into a `RuntimeView`; the API and the deletion-cost writer only read views. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, field, fields
from operator import itemgetter
from typing import Final, NamedTuple, overload

from autoscaler.names import ServedMetric


class RuntimeKey(NamedTuple):
    """A ModelMesh runtime is one Deployment in one namespace.

    A named tuple rather than a frozen dataclass: the refresh looks every runtime up by its key in several
    dicts (its memory, its warm-up state, the views), and a dataclass's `__hash__` and `__eq__` are Python
    methods, about 3,200 CPU instructions a lookup, 13,000 a runtime in the decisions' bench alone (10% of a
    refresh of 5,000 two-pod runtimes); a tuple hashes and compares in C. Same fields, same `repr`, same
    order (field by field), still immutable."""

    namespace: str
    deployment: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.deployment}"


@dataclass(frozen=True, slots=True)
class PodSample:
    """The newest good signals of one pod, as its exporter (or Prometheus) reported them.

    Freshness is per signal (docs/design.md, Missing data): `sampled_at` is the Unix time the load and cache signals
    describe (the exporter's own `last_success_timestamp_seconds{collector="modelmesh"}` when it reports one, else
    the time of the scrape); `gpu_sampled_at` is the time of `gpu_busy` (the exporter's `collector="gpu"` timestamp,
    or the DCGM series' own sample time). A GPU collector can fail or hang while the ModelMesh one works, so one
    timestamp for both would let an old GPU reading pass as fresh. `gpu_sampled_at` None with a `gpu_busy` means the
    source knows only one time for the pod: `sampled_at` then stands for both.
    A time is None when no good data was ever read. A signal is None when the pod does not report it (no
    GPU, no model loaded for `lru_age_s`).

    Values are already validated: every signal finite and non-negative, every time finite, else None. Each
    producer guarantees it where it reads the value, and reports garbage as it always has: the exporter text
    reader (`sources.exposition`) and the Prometheus source (`policies.samples.valid_value`, which
    also counts and logs it) leave a garbled value absent, and the simulator passes its samples through
    `policies.samples.clean_sample`. The policies rely on it and do not check again (a pass over 10,000 pods
    every refresh); tests/sources/test_clean_samples.py holds each source to it.
    """

    name: str
    ready: bool = True
    sampled_at: float | None = None
    gpu_sampled_at: float | None = None
    gpu_busy: float | None = None
    requests_per_second: float | None = None
    queue_delay_s: float | None = None
    cache_misses_per_second: float | None = None
    lru_age_s: float | None = None
    cache_used_ratio: float | None = None
    models_loaded: float | None = None
    # Model id -> the time this pod last served it, on the clock of `sampled_at`; None when the pod's exporter
    # reports no per-model use (ModelMesh without per-model metrics). Feeds the unique-copy need term.
    recent_models: Mapping[str, float] | None = None
    # How long the pod's exporter keeps a model in `recent_models` after it was served (its
    # `--model-recency-horizon`, `modelmesh_exporter_model_recency_horizon_seconds`); None where it does not say (an
    # exporter from before the series, the Prometheus source). A horizon below `target_lru_age_s` cuts the cache
    # need's count to the horizon: the decision warns and holds the cache term (docs/design.md, Recommendation).
    recency_horizon_s: float | None = None
    # Creation time, for the ReplicaSet's "newest first" tie-break (simulator and scenario tests).
    created_at: float | None = None
    # The pod's exporter says it has no GPU collector (it was started with `--no-gpu`: it lists its collectors'
    # successes, none of them "gpu"). Only a positive word counts: False wherever the source cannot tell (the
    # Prometheus source, the simulator), so that a GPU reading merely late or failing is never taken for none.
    no_gpu_collector: bool = False
    # `gpu_busy` is the pod's last good one, kept by the source (`sources.held_gpu`) while the pod's readings come
    # without one (its GPU collector failing, DCGM's series gone): missing now, whatever its time, so that what uses
    # the GPU may rise but not fall (DESIGN §6: a signal absent while the pod reported it before), and counted at
    # that value in the GPU's power mean while recent, as a whole pod's held sample is (docs/design.md, Missing data).
    gpu_held: bool = False
    # When the pod, seen Ready before, stopped being Ready (the Kubernetes discovery's clock, Unix time); None while
    # it is Ready, when it was never seen Ready (a pod starting), or is terminating. A hot pod that fails its
    # readiness probe under load still exists and, ModelMesh routing between its pods itself, may still serve:
    # for a while it counts as missing data, not as no load (`policies.unready_pods`).
    unready_since: float | None = None


@dataclass(frozen=True, slots=True)
class RuntimeSnapshot:
    """Everything one refresh learned about one runtime.

    `pods` holds every pod discovery knows, Ready or not, with its last good sample (possibly old or None);
    freshness is judged by the policies against the refresh clock, not by the source. `source_ok` is False
    when the backend as a whole failed for this refresh (Prometheus down, discovery broken): then nothing may
    be lowered. `replicas` is the Deployment's current `spec.replicas` when known.
    """

    key: RuntimeKey
    pods: tuple[PodSample, ...]
    taken_at: float
    source_ok: bool = True
    discovery_ok: bool = True
    """False while pod discovery is out of date for the runtime's namespace (the Kubernetes API's pod watch or
    Deployment read failing), which `source_ok` is False for too: the decision then says so, not "metric source
    down", since the exporters (or Prometheus) may answer all the while and an operator sent to them finds nothing."""
    replicas: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str | None = None
    """The Deployment's uid, where discovery reads it: a runtime deleted and created again under the same name
    is another runtime, whose memory starts again (`Refresher`)."""
    deleting: bool = False
    """The Deployment carries a `metadata.deletionTimestamp` (discovery reads it): it is being deleted. Foreground
    cascading deletion (`kubectl delete --cascade=foreground`, Argo CD, Flux) deletes its pods first and keeps the
    Deployment readable until they are gone: no Ready pods then is the deletion, not a runtime failing."""
    models_unread: bool = False
    """The source asked for per-model use and could not read it this refresh (the Prometheus source's models
    query failed or answered partly; a pod, Prometheus's or a scraped exporter's, published last-served times
    that were every one garbage): pods without it are no evidence that ModelMesh stopped reporting it, so the
    runtime's memory of per-model use does not age (`models_forgetting`)."""
    read_failures: Mapping[str, str] = field(default_factory=dict)
    """Why the source's last read of a pod failed, in a few words (`scrape failed (connect)`), by pod name, where
    it did (the pod's sample is then its last good one, or none). Said in place of "no request load" for a pod
    not fresh (`policies.warmup`), which sent an operator to ModelMesh for a scrape refused at a wrong
    --exporter-port."""


@dataclass(frozen=True, slots=True)
class PodView:
    """How one pod entered the decision: shown in /debug/runtimes and used for deletion costs."""

    name: str
    ready: bool
    fresh: bool
    age_s: float | None
    gpu_busy: float | None
    requests_per_second: float | None
    queue_delay_s: float | None
    lru_age_s: float | None
    cache_used_ratio: float | None
    weight: float  # this pod's share of the power-mean sum of its request rate (0..1), 0 when not counted
    need: float | None = None
    deletion_cost: int | None = None
    # Per signal ("gpu", "requests", "queue", "cache"): "fresh", "stale" (its timestamp is too old),
    # "missing" (not reported while other pods report it or the runtime reported it before), "absent" (the GPU
    # only: the pod's exporter has no GPU collector) or "none" (the runtime has no such signal). A Ready pod
    # with a stale or missing signal holds the values that use it.
    signals: tuple[tuple[str, str], ...] = ()
    # Models only this pod (of the Ready ones) served in the last `target_lru_age_s`: its unique copies, which
    # the unique-copy need term scores. None when no Ready pod of the runtime reports per-model use, or the pod
    # does not, or is not Ready.
    unique_models: int | None = None


PodRow = tuple[
    str, bool, bool, float | None, float | None, float | None, float | None, float | None, float | None, float,
    float | None, int | None, tuple[tuple[str, str], ...], int | None,
]
"""One pod of a view as plain values: `PodView`'s fields, in its order."""

POD_FIELDS: Final = tuple(f.name for f in fields(PodView))
"""The names of a `PodRow`'s values, in order."""

_cost_fields: Final = itemgetter(*(POD_FIELDS.index(name) for name in ("name", "ready", "fresh", "deletion_cost")))


@dataclass(frozen=True, slots=True)
class PodViews(Sequence[PodView]):
    """The pods of one runtime's view, in the snapshot's order: one plain tuple of `PodView`'s fields per pod
    (`rows`), read as `PodView`s.

    Why rows rather than a tuple of `PodView`s: the refresh reads every pod of every view (its /debug record,
    the deletion-cost plan), and at 10,000 pods a refresh a frozen `PodView` per pod cost about a third of the
    decisions, and as much again to read back into the /debug record's plain values. A row is one tuple the
    decision builds as it ranks the pod and the /debug record carries as it is; a `PodView` is made only for
    whoever reads one (the warm-up check, a view's JSON, tests), equal to what the decision used to build.
    The readers of every pod on every refresh take the rows, or `deletion_costs`, without one.
    """

    rows: tuple[PodRow, ...] = ()

    @classmethod
    def of(cls, views: Iterable[PodView]) -> PodViews:
        """The pods of these `PodView`s (a view built by hand, as tests and the plain decision build them)."""
        return cls(tuple(astuple(view) for view in views))  # each a PodRow: astuple of a PodView

    def deletion_costs(self) -> Iterator[tuple[str, bool, bool, int | None]]:
        """(name, ready, fresh, deletion cost) of each pod, without making its `PodView`: what the
        deletion-cost writer and the simulator read of every pod on every refresh."""
        return map(_cost_fields, self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> PodView: ...

    @overload
    def __getitem__(self, index: slice) -> PodViews: ...

    def __getitem__(self, index: int | slice) -> PodView | PodViews:
        if isinstance(index, slice):
            return PodViews(self.rows[index])
        return PodView(*self.rows[index])

    def __iter__(self) -> Iterator[PodView]:
        return (PodView(*row) for row in self.rows)


@dataclass(frozen=True, slots=True)
class ServedValue:
    """One served series: the smoothed value, or None when it is unknown (the API answers 503)."""

    value: float | None
    raw: float | None
    timestamp: float | None  # time of the oldest sample used


@dataclass(frozen=True, slots=True)
class RuntimeView:
    """What the API serves for a runtime, and why: the product of one refresh."""

    key: RuntimeKey
    refreshed_at: float
    window_s: float
    ready_pods: int
    fresh_pods: int
    coverage: float
    complete: bool  # every Ready pod had fresh data and the source was up: values may fall
    known: bool  # coverage and source good enough to serve at all; else 503
    values: dict[ServedMetric, ServedValue]
    proposals: dict[str, int | None]
    winner: str | None
    pods: PodViews
    reason: str = ""  # why values are held or unknown, for logs and /debug
    consecutive_misses: int = 0
    current_replicas: int | None = None
    # Per signal: the fraction of Ready pods on which it is fresh (coverage and 503 per signal: docs/design.md,
    # Missing data).
    signal_coverage: dict[str, float] = field(default_factory=dict)
    # Value or term → why it may not fall this refresh (or keeps its last proposal), for /debug.
    held: dict[str, str] = field(default_factory=dict)
    # Configuration problems the operator should fix (e.g. no capacity signal: which setting to add).
    warnings: tuple[str, ...] = ()
    # The replica bounds applied: (lower, upper); upper None is no cap.
    bounds: tuple[int, int | None] = (1, None)
    # Why a runtime the adapter has no memory of is not served in full yet (it just started, or the runtime
    # is new: `autoscaler.policies.warmup`); empty once warm.
    warming_up: str = ""
    # The oldest fresh sample behind the values (`Aggregate.fresh_sample_at`): how far the source lags, which
    # `modelmesh_autoscaler_metric_freshness_seconds` measures. The values' `timestamp` also counts the last
    # sample of a stale Ready pod they are held for; None where no view said (the `timestamp` then stands).
    fresh_sample_at: float | None = None
    # Its Deployment is being deleted and no pod is Ready (`RuntimeSnapshot.deleting`): nothing to judge.
    being_deleted: bool = False
    # The `controller.kubernetes.io/pod-deletion-cost` each pod carries (None: none), as the deletion-cost writer
    # knows it at the refresh (the pod watch; without one, what the leader wrote), where it writes the runtime's
    # pods. /debug shows it as each pod's `deletion_cost_on_pod`, beside `deletion_cost`, the cost the ranking
    # wants: shown alone, the wanted 500 read as written while the pods carried 700 and every patch was refused.
    # Filled in place by the refresh that made the view (each view has a dict of its own).
    costs_on_pods: dict[str, int | None] = field(default_factory=dict)
    # Served value → why it is above its raw value while nothing holds it: the slow scale-down, with the smoothed
    # value, `scale_down_tau_s` and when the served value reaches raw (`autoscaler.policies.slow_fall`), for /debug.
    # Empty on nearly every refresh: only a value in the middle of a fall has an entry.
    falling: dict[str, dict[str, float | str]] = field(default_factory=dict)
    # Pod name → whether the values count it as a Ready pod (what `ready_pods` counts) and why, for each pod they
    # count otherwise than Kubernetes' readiness says: a pod not Ready held as missing data (`unready_pods`,
    # counted), one Ready again with no fresh rate read past the hold (counted as not Ready), a rollout's surge pod
    # (`surge_pods`, left out). /debug shows each pod's `counted` and `reason` from it: mid-rollout `ready_pods`
    # read 4 beside 7 pods all `ready`, and a pod Ready in kubectl read `ready: false`, neither with a word on the
    # pod. Empty on nearly every refresh (one shared empty mapping, never written to).
    pods_counted: dict[str, tuple[bool, str]] = field(default_factory=dict)

    @property
    def nothing_to_judge(self) -> bool:
        """Scaled to zero, or being deleted without Ready pods: no values, and nothing missing to alert on (no
        `runtime_values_known` series, no misses, an INFO line); still a 503, on which the HPA holds."""
        return self.being_deleted or self.scaled_to_zero

    @property
    def scaled_to_zero(self) -> bool:
        """The Deployment asks for no pods and none is Ready: nothing to judge, and nothing missing either
        (modelmesh-serving scales a runtime that no InferenceService uses to zero)."""
        return self.current_replicas == 0 and self.ready_pods == 0


PodUrls = dict[str, str | None]
"""Each pod's scrape URL, by pod name (`ScrapeSource.scrape_urls`), None where the pod is not scraped; shown in
/debug as each pod's `scrape_url`. Held apart from the pods' rows so that only /debug carries it: the decisions,
the metric answers and the deletion costs never read it."""
