"""The adapter's report on itself, served at `/metrics` from its own registry.

Modelled on custom-metrics-apiserver (request counts and latency, a freshness histogram of what was served)
and node_exporter (per-source errors and refresh duration), plus what only this adapter knows: how many
refreshes in a row a runtime has been missing data, and how its authentication and authorization fare (a
rising `error` count means the Kubernetes API is failing the adapter's reviews: HPA requests get errors).

No `_created` series: prometheus_client writes one beside every counter and histogram series by default,
doubling them; they are in none of the documented metric lists and Prometheus users turn them off.
`prometheus_client` has one switch for the whole process (`disable_created_metrics`), turned here before any
series exists (tests/test_no_created_series.py scrapes both formats).

Each family of series is made, and set, by a mixin of its own: `selfmetrics_api` (the API's requests and
reviews), `selfmetrics_reads` (refreshes, the metrics source, discovery, the Kubernetes loops),
`selfmetrics_runtimes` (per runtime), `selfmetrics_deletion_costs` and `selfmetrics_bridge`. `AdapterMetrics` makes
them in one order and keeps what is the whole registry's: the build, the live process series, the leader.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, ProcessCollector, disable_created_metrics
from prometheus_client.registry import Collector

from autoscaler.names import ADAPTER_BUILD_INFO
from autoscaler.request_tally import RequestTally
from autoscaler.selfmetrics_api import ApiSeries
from autoscaler.selfmetrics_bridge import BridgeSeries
from autoscaler.selfmetrics_deletion_costs import DeletionCostSeries
from autoscaler.selfmetrics_reads import ReadSeries
from autoscaler.selfmetrics_runtimes import RuntimeSeries
from autoscaler.values_age import ValuesAge
from exporter import build_info
from exporter.names import BUILD_INFO_LABELS


class AdapterMetrics(ApiSeries, ReadSeries, RuntimeSeries, DeletionCostSeries, BridgeSeries):
    """Every series of the adapter's `/metrics`, one family of them per mixin (`autoscaler.selfmetrics_*`), made in
    one order: `/metrics` lists them so, and the refresh process sends its own in that order
    (`autoscaler.api.selfmetrics_split.refresh_families`, which reads them off this object's attributes)."""

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
        self._add_request_series()
        self._add_read_series()
        self._add_runtime_series()
        self._add_review_series()
        self._add_deletion_cost_series()
        self._add_bridge_series(bridge)
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

    def runtime_exposition(self) -> bytes:
        """The per-runtime, per-pod and per-RuntimeScale families in the text format, rendered only where a
        value changed."""
        if not self.per_runtime:
            return b""
        return b"".join(gauge.exposition() for gauge in (*self.runtime_gauges, *self.object_gauges))
