"""The deletion-cost writer's series, mixed into `AdapterMetrics` (`autoscaler.selfmetrics`) (docs/design.md,
Choosing the pod to remove): the cost last written on each pod, the PATCHes by result and by the API server's
status, the writer's passes, and the scale-downs held until the costs are written. Every result and reason is made
at 0, so that the alerts on their rates see the first count.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from prometheus_client import CollectorRegistry, Counter

from autoscaler.ranking_hold import EXPIRED, HoldReason
from autoscaler.runtime_gauges import RuntimeGauge

DeletionCostPatchResult = Literal["ok", "not_found", "retried", "failed"]
"""A deletion-cost PATCH's `result` label. One type for the writer and the series made at 0 (`get_args`): a result
the writer counts but nobody made at 0 would appear at its first count, with no rate for the alert to see."""
DELETION_COST_PATCH_RESULTS: Final = get_args(DeletionCostPatchResult)


class DeletionCostSeries:
    """The deletion-cost writer's series, and the count of its PATCHes."""

    registry: CollectorRegistry
    """`AdapterMetrics.registry`, which the series are made in."""

    def _add_deletion_cost_series(self) -> None:
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

    def deletion_cost_patched(self, result: DeletionCostPatchResult) -> None:
        """Count one deletion-cost PATCH by `result`, a label made at 0 (mypy holds the writer to the type)."""
        self.deletion_cost_patches.labels(result).inc()
