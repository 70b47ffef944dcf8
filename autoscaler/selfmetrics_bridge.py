"""The RuntimeScale bridge's series, mixed into `AdapterMetrics` (`autoscaler.selfmetrics`) (docs/design.md, The
RuntimeScale bridge): whether this adapter runs it, its writes by what they wrote and their result, the replicas it
set back, its failed lists, and each RuntimeScale's Ready condition and whether its status answers its spec (with
`--per-runtime-metrics off`, a count of the stale ones per namespace in their place).
"""

from __future__ import annotations

import contextlib
from typing import Final, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge

from autoscaler.runtime_gauges import RuntimeGauge

BridgeWrite = Literal["servingruntime_replicas", "runtimescale_replicas", "runtimescale_status"]
"""What a bridge write wrote (`write` label of `bridge_writes_total`)."""
BRIDGE_WRITES: Final = get_args(BridgeWrite)
BridgeWriteResult = Literal["ok", "retried", "failed"]
"""A bridge write's `result` label: one type for the bridge and the series made at 0, as `DeletionCostPatchResult`."""
BRIDGE_WRITE_RESULTS: Final = get_args(BridgeWriteResult)


class BridgeSeries:
    """The bridge's and the RuntimeScales' series, and what sets them."""

    registry: CollectorRegistry
    """`AdapterMetrics.registry`, which the series are made in."""
    per_runtime: bool
    """`AdapterMetrics.per_runtime`: with it off, the per-namespace count of stale RuntimeScales is made instead."""

    def _add_bridge_series(self, bridge: bool) -> None:
        """`bridge`: whether this adapter runs the RuntimeScale bridge (`bridge_enabled`)."""
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
        self.runtime_scales_status_stale = None if self.per_runtime else Gauge(
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

    def bridge_wrote(self, write: BridgeWrite, result: BridgeWriteResult) -> None:
        """Count one bridge write by what it wrote and `result`, labels made at 0 (as `deletion_cost_patched`)."""
        self.bridge_writes.labels(write, result).inc()
