"""How the adapter's reads fare, mixed into `AdapterMetrics` (`autoscaler.selfmetrics`), after node_exporter's
per-collector success and duration: each refresh's duration, the metrics source's reads and failures, pod
discovery's health by namespace, and the long-lived Kubernetes loops' failures by cause and whether their watches
are open (`autoscaler.kube.watch_health`: `AdapterMetrics` is the `WatchHealth` those loops report to).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from autoscaler.kube.watch_health import FailureReason, Watched


class ReadSeries:
    """The refresh's, the metrics source's, discovery's and the watches' series, and what sets them."""

    registry: CollectorRegistry
    """`AdapterMetrics.registry`, which the series are made in."""

    def _add_read_series(self) -> None:
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
