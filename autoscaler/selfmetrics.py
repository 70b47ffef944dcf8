"""The adapter's report on itself, served at `/metrics` from its own registry.

Modelled on custom-metrics-apiserver (request counts and latency, a freshness histogram of what was served)
and node_exporter (per-source errors and refresh duration), plus what only this adapter knows: how many
refreshes in a row a runtime has been missing data, and how its authentication and authorization fare (a
rising `error` count means the Kubernetes API is failing the adapter's reviews: HPA requests get errors).

No `_created` series: prometheus_client writes one beside every counter and histogram series by default,
doubling them; they are in none of the documented metric lists and Prometheus users turn them off.
`prometheus_client` has one switch for the whole process (`disable_created_metrics`), turned here before any
series exists (tests/test_no_created_series.py scrapes both formats).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.registry import Collector

from autoscaler.kube.watch_health import FailureReason, Watched
from autoscaler.model import RuntimeView
from autoscaler.names import ADAPTER_BUILD_INFO
from autoscaler.policies.recommendation import MAX_REPLICAS, uncapped_recommendation
from autoscaler.ranking_hold import EXPIRED, HoldReason
from autoscaler.request_tally import RequestTally
from autoscaler.runtime_gauges import RuntimeGauge
from autoscaler.values_age import ValuesAge
from exporter import build_info
from exporter.names import BUILD_INFO_LABELS

DeletionCostPatchResult = Literal["ok", "not_found", "retried", "failed"]
"""A deletion-cost PATCH's `result` label. One type for the writer and the series made at 0 (`get_args`): a result
the writer counts but nobody made at 0 would appear at its first count, with no rate for the alert to see."""
DELETION_COST_PATCH_RESULTS: Final = get_args(DeletionCostPatchResult)
BridgeWrite = Literal["servingruntime_replicas", "runtimescale_replicas", "runtimescale_status"]
"""What a bridge write wrote (`write` label of `bridge_writes_total`)."""
BRIDGE_WRITES: Final = get_args(BridgeWrite)
BridgeWriteResult = Literal["ok", "retried", "failed"]
"""A bridge write's `result` label: one type for the bridge and the series made at 0, as `DeletionCostPatchResult`."""
BRIDGE_WRITE_RESULTS: Final = get_args(BridgeWriteResult)


class AdapterMetrics:
    def __init__(self, per_runtime: bool = True, *, bridge: bool = False) -> None:
        """`per_runtime` False (`--per-runtime-metrics off`) leaves out every series labelled by runtime, pod or
        RuntimeScale: they are still set (the code that sets them does not ask), but not exposed. `bridge`: whether
        this adapter runs the RuntimeScale bridge (`bridge_enabled`)."""
        self.per_runtime = per_runtime
        disable_created_metrics()  # type: ignore[no-untyped-call]  # the process's switch; the exporter turns it too
        self.registry = CollectorRegistry(auto_describe=True)
        self._live: tuple[Collector, ...] = ()  # `serve_live_series`
        self.tally = RequestTally()
        """The serving path counts into its series through this (`autoscaler.request_tally`)."""
        self.build_info = Gauge(
            ADAPTER_BUILD_INFO, "The build this adapter runs (its version and commit); always 1.",
            list(BUILD_INFO_LABELS), registry=self.registry,
        )
        self.build_info.labels(build_info.version(), build_info.revision()).set(1)
        self.requests = Counter(
            "modelmesh_autoscaler_api_requests_total",
            "API requests by route and HTTP status code.",
            ["path", "code"], registry=self.registry,
        )
        self.scaled_to_zero_answers = Counter(
            "modelmesh_autoscaler_api_scaled_to_zero_answers_total",
            "External metric and KEDA answers that were a 503 for a runtime scaled to zero (its Deployment asks for "
            "0 replicas): nothing is wrong; counted in api_requests_total too, and left out of the 503 alert.",
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "modelmesh_autoscaler_api_request_duration_seconds",
            "API request latency by route.",
            ["path"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )
        self.freshness = Histogram(
            "modelmesh_autoscaler_metric_freshness_seconds",
            "Age of the oldest sample behind each served value, at the time it was served.",
            registry=self.registry,
            buckets=(1, 5, 10, 15, 30, 45, 60, 120, 300),
        )
        self.refresh_seconds = Histogram(
            "modelmesh_autoscaler_refresh_duration_seconds",
            "Duration of one refresh: read every runtime's pods and decide.",
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30),
        )
        self.source_errors = Counter(
            "modelmesh_autoscaler_source_errors_total",
            "Failed reads from the metrics source by source and reason.",
            ["source", "reason"], registry=self.registry,
        )
        self.source_reads = Counter(
            "modelmesh_autoscaler_source_reads_total",
            "Reads tried from the metrics source by source: one per exporter scrape (the scrape source only), so "
            "that failures can be judged against the fleet's size.",
            ["source"], registry=self.registry,
        )
        self.source_partial_answers = Counter(
            "modelmesh_autoscaler_source_partial_answers",
            "Refreshes whose answers from the metrics source said they were partial (Thanos Query's warnings about "
            "stores it could not reach, VictoriaMetrics' isPartial), by source. Not an error: the pods left out "
            "hold their last good samples and turn stale; /debug/runtimes names the runtimes it affects.",
            ["source"], registry=self.registry,
        )
        self.discovery_healthy = Gauge(
            "modelmesh_autoscaler_discovery_healthy",
            "1 while pod discovery of the namespace (`*`: all namespaces, without --namespaces; then also each "
            "namespace of a policy-file runtime, whose Deployment is read there by name) is current: its pod watch "
            "and Deployment read work; 0 until the first list and while either fails (a RoleBinding missing): "
            "its runtimes hold their replicas, and one whose Deployment was never read is not served at all "
            "(/debug of its runtimes quotes the API's error). Absent with a targets file.",
            ["namespace"], registry=self.registry,
        )
        # The long-lived Kubernetes loops (`autoscaler.kube.watch_health`): only pod discovery had a series, so a
        # refused HPA or RuntimeScale watch was in the log alone.
        self.watch_failures = Counter(
            "modelmesh_autoscaler_watch_failures_total",
            "Failed lists, watches and reads of the adapter's long-lived Kubernetes loops, by loop (pods: discovery's "
            "pod watch; hpas: the HPA watch, the replica bounds; runtimescales: the bridge's RuntimeScale watch; "
            "deployments: discovery's Deployment resync) and cause: forbidden (401, 403: RBAC), refused (another "
            "4xx; 404 is the RuntimeScale CRD not installed), throttled (429), server_error (5xx), no_answer "
            "(connection, timeout, TLS, a stream dropped), expired (410: listed again; now and then is normal), "
            "unexpected (a bug of the adapter, in its log). Each loop's causes from 0 once it runs.",
            ["watch", "reason"], registry=self.registry,
        )
        self.watches_open = Gauge(
            "modelmesh_autoscaler_watch_established",
            "1 while the watch of the namespace (`*`: all namespaces) is open, 0 until it first opens and from a "
            "failure until it opens again (what it keeps is then as last seen). Not for deployments, which are "
            "read on a timer (discovery_healthy says their reads' state).",
            ["watch", "namespace"], registry=self.registry,
        )
        self.consecutive_misses = RuntimeGauge(
            "modelmesh_autoscaler_runtime_consecutive_misses",
            "Refreshes in a row in which a runtime lacked fresh data for some Ready pod or the source was down.",
            ("namespace", "deployment"),
        )
        self.runtime_known = RuntimeGauge(
            "modelmesh_autoscaler_runtime_values_known",
            "1 when the runtime's values are served, 0 while the API answers 503 for all of them (one metric no pod "
            "reports is 503 alone: its served_value is absent); absent while it is scaled to zero (its Deployment "
            "asks for 0 replicas: nothing to know) or being deleted without Ready pods.",
            ("namespace", "deployment"),
        )
        self.runtime_warming_up = RuntimeGauge(
            "modelmesh_autoscaler_runtime_warming_up",
            "1 while the adapter has no memory of a runtime (it just started, or the runtime is new) and answers "
            "503 while it waits for every Ready pod to be fresh (at most warmup_grace_s), or of some of its values, "
            "unknown (503) until every Ready pod has their signal fresh (/debug says which pods lack what); else 0.",
            ("namespace", "deployment"),
        )
        self.served_value = RuntimeGauge(
            "modelmesh_autoscaler_served_value",
            "The value served for each runtime and metric, after smoothing.",
            ("namespace", "deployment", "metric"),
        )
        self.uncapped_replicas = RuntimeGauge(
            "modelmesh_autoscaler_runtime_uncapped_replicas",
            "Present only while the runtime's max_replicas (the HPA's maxReplicas, unless the policy sets "
            "max_replicas) cuts its recommendation: the replicas its load calls for without the cap. "
            "modelmesh_desired_replicas is then served at the cap, so the HPA says DesiredWithinRange, never "
            "TooManyReplicas.",
            ("namespace", "deployment"),
        )
        self.runtime_gauges = (self.consecutive_misses, self.runtime_known, self.runtime_warming_up, self.served_value,
                               self.uncapped_replicas)
        if per_runtime:
            for gauge in self.runtime_gauges:
                self.registry.register(gauge)
        self.authentications = Counter(
            "modelmesh_autoscaler_authentications_total",
            "Authentication outcomes of protected requests by method (requestheader, x509, token, none) and result "
            "(success, failure; error: a token whose TokenReview could not be made).",
            ["method", "result"], registry=self.registry,
        )
        self.authorizations = Counter(
            "modelmesh_autoscaler_authorization_decisions_total",
            "Authorization decisions by decision (allowed, denied, error) and whether the cache answered.",
            ["decision", "cached"], registry=self.registry,
        )
        self.kube_api_seconds = Histogram(
            "modelmesh_autoscaler_kube_api_request_duration_seconds",
            "Kubernetes API calls made for authentication and authorization, by call and outcome "
            "(ok, error, timeout).",
            ["call", "outcome"], registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        # Deletion costs and leader election (docs/design.md, Choosing the pod to remove).
        self.pod_deletion_cost = RuntimeGauge(
            "modelmesh_autoscaler_pod_deletion_cost",
            "The controller.kubernetes.io/pod-deletion-cost each pod of the runtimes the leader writes for carries, "
            "as the ReplicaSet reads it: what its pod watch shows, 0 where none (the leader only).",
            ("namespace", "pod"),
        )
        self.deletion_cost_patches = Counter(
            "modelmesh_autoscaler_deletion_cost_patches_total",
            "Deletion-cost patches by result: ok, not_found (pod gone), retried (409, 429, 5xx or no answer; "
            "retried with backoff), failed (refused; tried again at the 5-minute refresh).",
            ["result"], registry=self.registry,
        )
        # Every result from 0, as the holds below: ModelMeshDeletionCostPatchesFailing rates `failed`, and a series
        # that first appears at 1 has no rate in Prometheus: the first refusals warned a 5-minute retry late, or
        # never where they were one pass's.
        for result in DELETION_COST_PATCH_RESULTS:
            self.deletion_cost_patches.labels(result)
        self.deletion_cost_patch_errors = Counter(
            "modelmesh_autoscaler_deletion_cost_patch_errors_total",
            "Deletion-cost patches that failed or were retried, by the API server's HTTP status (`none`: no "
            "answer): tells a missing Role (403) from a webhook or policy (400, 422, 500) or throttling (429).",
            ["code"], registry=self.registry,
        )
        self.deletion_cost_passes = Counter(
            "modelmesh_autoscaler_deletion_cost_passes_total",
            "Passes of the deletion-cost writer that planned against a refresh's rankings (the leader only; one a "
            "refresh, more while retries fall due), whether or not a cost was due: the PATCH counters stand still "
            "while no cost changes, this one moves while the leader's writer is alive.",
            registry=self.registry,
        )
        self.scale_down_holds = Counter(
            "modelmesh_autoscaler_scale_down_holds_total",
            "Refreshes at which a runtime's modelmesh_desired_replicas was held from falling until its pods carry "
            "their new deletion costs, by what the writes waited on: queued (the writer's turn; usual, one "
            "refresh), refused, throttled, no_answer, leader (a replica not leading waits for the leader's "
            "writes); and expired, once a hold: it reached its bound and the value fell with the costs as they were.",
            ["reason"], registry=self.registry,
        )
        # Every reason from 0: a series that first appears at 1 has no increase() in Prometheus, so the first
        # expired hold of a replica would never reach ModelMeshScaleDownWithStaleDeletionCosts.
        for reason in (*HoldReason, EXPIRED):
            self.scale_down_holds.labels(reason)
        # The RuntimeScale bridge (docs/design.md, The RuntimeScale bridge).
        self.bridge_enabled = Gauge(
            "modelmesh_autoscaler_bridge_enabled",
            "1 where this adapter runs the RuntimeScale bridge (its leader carries each HPA's replicas to the "
            "ServingRuntime), 0 where it does not (--bridge off, a --targets file): what a replica's leader writes, "
            "so whether no leader stops scaling (ModelMeshAutoscalerNoLeader) or deletion costs only.",
            registry=self.registry,
        )
        self.bridge_enabled.set(1 if bridge else 0)
        self.bridge_writes = Counter(
            "modelmesh_autoscaler_bridge_writes_total",
            "Writes of the RuntimeScale bridge by what was written (servingruntime_replicas, "
            "runtimescale_replicas, runtimescale_status) and result: ok, retried (409, 429, 5xx or no answer; "
            "retried with backoff), failed (refused; tried again at the next resync).",
            ["write", "result"], registry=self.registry,
        )
        for write in BRIDGE_WRITES:  # from 0, for ModelMeshRuntimeScaleWritesFailing's rate of `failed`
            for result in BRIDGE_WRITE_RESULTS:
                self.bridge_writes.labels(write, result)
        self.bridge_set_backs = Counter(
            "modelmesh_autoscaler_bridge_set_backs_total",
            "ServingRuntimes' spec.replicas set back to their RuntimeScale's ask after something else set them (a "
            "kubectl apply or edit, a GitOps tool, another operator; the leader only). A rate that stays up is "
            "another writer fighting the HPA: the log names the runtime (`set to N again by another writer`).",
            registry=self.registry,
        )
        self.bridge_runtime_scale_list_failures = Counter(
            "modelmesh_autoscaler_bridge_runtime_scale_list_failures_total",
            "Lists of RuntimeScales the bridge's pass could not make (refused, 5xx or no answer; not a 404, "
            "the CRD not installed): the RuntimeScales of that namespace, or of all, then get neither their "
            "replicas carried nor a status (the leader only).",
            registry=self.registry,
        )
        self.runtime_scale_ready = RuntimeGauge(
            "modelmesh_autoscaler_runtime_scale_ready",
            "1 while the bridge carries a RuntimeScale's replicas to its ServingRuntime (its Ready condition is "
            "True), else 0 (the leader only).",
            ("namespace", "runtimescale"),
        )
        self.runtime_scale_not_ready = RuntimeGauge(
            "modelmesh_autoscaler_runtime_scale_not_ready",
            "1 while a RuntimeScale's Ready condition is False, with that condition's reason (as kubectl describe "
            "runtimescale shows it); absent while it is Ready (the leader only). NoReplicas is the normal state of "
            "a runtime scaled to zero; the other reasons mean its HPA's replicas reach no ServingRuntime.",
            ("namespace", "runtimescale", "reason"),
        )
        self.runtime_scale_status_stale = RuntimeGauge(
            "modelmesh_autoscaler_runtime_scale_status_stale",
            "1 while a RuntimeScale's Ready condition was written for an older spec than its own (observedGeneration "
            "below metadata.generation) or not at all: no leader has answered its HPA's last ask, and READY may "
            "still read True; absent once answered. Every replica, from its own RuntimeScale watch.",
            ("namespace", "runtimescale"),
        )
        # Not made at all with per-runtime metrics on: the refresh process renders every metric it holds
        # (`selfmetrics_split.refresh_families`), registered or not.
        self.runtime_scales_status_stale = None if per_runtime else Gauge(
            "modelmesh_autoscaler_runtime_scales_status_stale",
            "How many RuntimeScales of the namespace runtime_scale_status_stale would show (their Ready condition "
            "written for an older spec, or not at all); absent while none. Published with --per-runtime-metrics "
            "off only, in place of those series, so that RuntimeScales left behind are still alerted on "
            "(ModelMeshRuntimeScalesStatusStaleInNamespace). Every replica, from its own RuntimeScale watch.",
            ["namespace"], registry=self.registry,
        )
        self._stale_scales: set[tuple[str, str]] = set()
        """The RuntimeScales whose status is stale: what the per-namespace count is counted from."""
        self._scale_reasons: dict[tuple[str, str], str] = {}
        """The reason each RuntimeScale's not-Ready series carries: one series per RuntimeScale, the last
        reason's removed when it changes."""
        self.object_gauges = (self.pod_deletion_cost, self.runtime_scale_ready, self.runtime_scale_not_ready,
                              self.runtime_scale_status_stale)
        """Per pod and per RuntimeScale, set one series at a time (by the leader, but the stale statuses: by
        every replica); kept as text like the per-runtime ones (`autoscaler.runtime_gauges`)."""
        if per_runtime:
            for gauge in self.object_gauges:
                self.registry.register(gauge)
        self.leader: Gauge | None = None  # published by `set_leader`, once this replica acts on the cluster

    def serve_live_series(self, updated_at: Callable[[], float | None], stall_limit_s: float | None = None) -> None:
        """Publish, in the one-process mode, the series read at each scrape: `process_*` (start time, CPU, memory,
        open files: without them a restart, a crash loop or a leak was invisible to Prometheus) and the age of the
        values served (`autoscaler.values_age`). A serving worker puts its own on its page instead, process_* of
        its refresh process (`selfmetrics_split.worker_metrics_handler`), so they are never among the series
        the refresh process sends. Called again (an app built again), it replaces them."""
        for collector in self._live:
            self.registry.unregister(collector)
        self._live = (ProcessCollector(registry=None), ValuesAge(updated_at, stall_limit_s))
        for collector in self._live:
            self.registry.register(collector)

    def set_leader(self, leading: bool) -> None:
        """Publish whether this replica writes to the cluster. The series exists only once it acts on the
        cluster at all: an adapter that writes nothing by configuration (`--deletion-cost=off` with the bridge
        off, or no Kubernetes API) has no leader to miss, and `ModelMeshAutoscalerNoLeader` must not fire."""
        if self.leader is None:
            self.leader = Gauge(
                "modelmesh_autoscaler_leader",
                "1 while this replica writes deletion costs or bridges replicas (it holds the leader Lease, or "
                "leader election is off), else 0; absent where it writes nothing to the cluster.",
                registry=self.registry,
            )
        self.leader.set(1 if leading else 0)

    def set_runtime_scale_ready(self, namespace: str, name: str, ready: bool, reason: str) -> None:
        """Publish a RuntimeScale's Ready condition: `runtime_scale_ready` 1 or 0 (its meaning since it was
        first shipped), and while it is not Ready, `runtime_scale_not_ready` with the reason, so that an alert can
        leave out NoReplicas (a runtime scaled to zero) and name what to do for the others."""
        self.runtime_scale_ready.labels(namespace, name).set(1 if ready else 0)
        last = self._scale_reasons.get((namespace, name))
        if last is not None and (ready or last != reason):
            self.runtime_scale_not_ready.remove(namespace, name, last)
            del self._scale_reasons[namespace, name]
        if not ready:
            self.runtime_scale_not_ready.labels(namespace, name, reason).set(1)
            self._scale_reasons[namespace, name] = reason

    def runtime_scale_status_seen(self, namespace: str, name: str, stale: bool) -> None:
        """Publish whether a watched RuntimeScale's status answers its spec (`bridge_status.status_stale`): the
        series exists only while it does not, so that an alert can name the RuntimeScale whose HPA changes
        nothing however its READY reads. Not the leader's alone, and kept when this replica stops leading: with
        no leader it is the one series that names the RuntimeScales left behind."""
        if stale:
            self.runtime_scale_status_stale.set((namespace, name), 1)
            self._stale_scales.add((namespace, name))
        else:
            self.runtime_scale_status_stale.remove(namespace, name)
            self._stale_scales.discard((namespace, name))
        if self.runtime_scales_status_stale is None:
            return
        count = sum(1 for scale_namespace, _ in self._stale_scales if scale_namespace == namespace)
        if count:
            self.runtime_scales_status_stale.labels(namespace).set(count)
        else:
            with contextlib.suppress(KeyError):  # none stale there before either
                self.runtime_scales_status_stale.remove(namespace)

    def forget_runtime_scale(self, namespace: str, name: str) -> None:
        """Remove a RuntimeScale's series: it is gone, or this replica stopped leading."""
        self.runtime_scale_ready.remove(namespace, name)
        last = self._scale_reasons.pop((namespace, name), None)
        if last is not None:
            self.runtime_scale_not_ready.remove(namespace, name, last)

    def deletion_cost_patched(self, result: DeletionCostPatchResult) -> None:
        """Count one deletion-cost PATCH by `result`, a label made at 0 (mypy holds the writer to the type)."""
        self.deletion_cost_patches.labels(result).inc()

    def bridge_wrote(self, write: BridgeWrite, result: BridgeWriteResult) -> None:
        """Count one bridge write by what it wrote and `result`, labels made at 0 (as `deletion_cost_patched`)."""
        self.bridge_writes.labels(write, result).inc()

    def watch_started(self, watch: Watched, scope: str | None) -> None:
        """A loop runs: each cause from 0 (a series that first appears at 1 has no increase() in Prometheus), and
        its watch not open yet. The loops are fixed at start (one per namespace watched), so the series stay few."""
        for reason in FailureReason:
            self.watch_failures.labels(watch, reason)
        if watch is not Watched.DEPLOYMENTS:
            self.watches_open.labels(watch, scope or "*").set(0)

    def watch_failed(self, watch: Watched, reason: FailureReason) -> None:
        self.watch_failures.labels(watch, reason).inc()

    def watch_established(self, watch: Watched, scope: str | None, established: bool) -> None:
        self.watches_open.labels(watch, scope or "*").set(1 if established else 0)

    def publish_discovery(self, healthy: Mapping[str, bool]) -> None:
        """Set discovery's health for each scope it watches. The scopes are fixed when discovery is built, so
        there is no series to remove; one a namespace, so they are kept with `--per-runtime-metrics off` too:
        the alert on them is what names a namespace whose runtimes never appeared at all."""
        for namespace, ok in healthy.items():
            self.discovery_healthy.labels(namespace).set(1 if ok else 0)

    def publish_runtimes(self, views: Iterable[RuntimeView]) -> None:
        """Set every per-runtime series from this refresh's views, and remove the series this refresh did not
        set: a runtime that disappeared leaves nothing, and a value that is unknown (the runtime answers 503,
        or the signal has no data) is absent rather than its last number going stale forever.

        The series keep their rendered text from one refresh to the next (`autoscaler.runtime_gauges`): at
        5,000 runtimes they are 35,000 series, most of whose values repeat. With `per_runtime` off, nothing."""
        if not self.per_runtime:
            return
        misses: dict[tuple[str, ...], float] = {}
        known: dict[tuple[str, ...], float] = {}
        warming: dict[tuple[str, ...], float] = {}
        served: dict[tuple[str, ...], float] = {}
        uncapped: dict[tuple[str, ...], float] = {}
        for view in views:
            namespace, deployment = labels = (view.key.namespace, view.key.deployment)
            misses[labels] = view.consecutive_misses
            if not view.nothing_to_judge:  # nothing to know (scaled to zero, being deleted): no "unknown" to alert on
                known[labels] = 1 if view.known else 0
            warming[labels] = 1 if view.warming_up else 0
            if not view.known:
                continue
            if view.winner == MAX_REPLICAS:  # rare: the cap cut the recommendation
                uncapped[labels] = uncapped_recommendation(view.proposals)
            for metric, value in view.values.items():
                if value.value is not None:
                    served[namespace, deployment, metric.value] = value.value
        self.consecutive_misses.update(misses)
        self.runtime_known.update(known)
        self.runtime_warming_up.update(warming)
        self.served_value.update(served)
        self.uncapped_replicas.update(uncapped)

    def runtime_exposition(self) -> bytes:
        """The per-runtime, per-pod and per-RuntimeScale families in the text format, rendered only where a
        value changed."""
        if not self.per_runtime:
            return b""
        return b"".join(gauge.exposition() for gauge in (*self.runtime_gauges, *self.object_gauges))
