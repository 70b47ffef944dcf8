"""The per-runtime series, mixed into `AdapterMetrics` (`autoscaler.selfmetrics`): what only this adapter knows of
each runtime it serves (refreshes in a row missing data, whether its values are known or warming up, each value
served, the replicas a cap cut), set from each refresh's views (`publish_runtimes`). They keep their rendered text
from one refresh to the next (`autoscaler.runtime_gauges`), and with `--per-runtime-metrics off` are not exposed.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from autoscaler.model import RuntimeView
from autoscaler.policies.recommendation import MAX_REPLICAS, uncapped_recommendation
from autoscaler.runtime_gauges import RuntimeGauge


class RuntimeSeries:
    """The per-runtime series (`runtime_gauges`), registered where `per_runtime`, and what sets them."""

    registry: CollectorRegistry
    """`AdapterMetrics.registry`, which the series are made in."""
    per_runtime: bool
    """`AdapterMetrics.per_runtime`: whether the series labelled by runtime, pod or RuntimeScale are exposed."""

    def _add_runtime_series(self) -> None:
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
        if self.per_runtime:
            for gauge in self.runtime_gauges:
                self.registry.register(gauge)

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
