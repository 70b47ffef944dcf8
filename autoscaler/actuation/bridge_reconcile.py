"""What the replica bridge does for one RuntimeScale in a round (`RuntimeScaleReconciler.reconcile`): read its
ServingRuntime and Deployment (from a full pass's lists, else one by one), decide, write only what differs, and
remember what it left. `ReplicaBridge` (`bridge`) decides when and which RuntimeScales; this module is all that
happens to one of them, so a reader of one runtime's story need not follow the loop's scheduling.

What it writes: a merge patch of `ServingRuntime.spec.replicas` (`spec.replicas` carried, a value set outside
set back), a merge patch of the RuntimeScale's `status` subresource (`bridge_status` decides it without I/O),
and (once, for a RuntimeScale created without replicas) its `spec.replicas` adopted from the runtime so that the
HPA's first read of the scale works (until then the API server refuses that read, so no scaler can write
first), conditional on the version read so that replicas set since are kept. A RuntimeScale whose runtime an
older one owns (`bridge_owners`) writes nothing to the runtime, only its status, without the pod selector; so does
one whose runtime has `serving.kserve.io/autoscalerClass` (modelmesh-serving then ignores `spec.replicas`: the status
gives the one patch that removes it and keeps the pods, and the watch hands it over once it is gone).

A failed read or write is raised to the loop, which schedules the retry (`bridge_retries`); the status says why
the runtime does not follow (`_report_not_written`, `_report_not_read`). Its lines are logged under the bridge's
logger name, `autoscaler.actuation.bridge`, the one operators filter on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from autoscaler.actuation.bridge_memory import ScaleMemory
from autoscaler.actuation.bridge_news import Fight, PassWrites, ReasonChanges, set_back_line, shown_replicas
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.actuation.bridge_status import (
    CLUSTER_SERVING_RUNTIMES,
    RUNTIME_SCALES,
    SERVING_RUNTIMES,
    Verdict,
    autoscaler_class,
    bridged_spec,
    deployment_name,
    desired_status,
    duplicate,
    misplaced_policy_annotations,
    not_read,
    not_written,
    replicas_of,
    verdict,
)
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON
from autoscaler.kube.timestamps import rfc3339
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.selfmetrics_bridge import BridgeWrite

log = logging.getLogger("autoscaler.actuation.bridge")


class ReconcileClient(Protocol):
    """What one RuntimeScale's reconcile needs from Kubernetes: reads of single objects and merge patches."""

    async def get_custom(self, resource: CustomResource, namespace: str | None, name: str) -> JSON | None: ...

    async def get_deployment(self, namespace: str, name: str) -> JSON | None: ...

    async def merge_patch_custom(
        self, resource: CustomResource, namespace: str, name: str, patch: JSON, *, subresource: str | None = None
    ) -> JSON: ...


class NotLeading(Exception):
    """A write was about to go out after this replica stopped leading: the reconcile ends there."""


Objects = dict[tuple[str, str], JSON]
"""Listed objects by (namespace, name)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One full pass's ServingRuntimes and Deployments; None where a list failed (then read one by one)."""

    runtimes: Objects | None
    deployments: Objects | None


class RuntimeScaleReconciler:
    """Reconciles one RuntimeScale at a time against its ServingRuntime and Deployment (`reconcile`).

    It shares the loop's state rather than keeping its own: `memory` (what each RuntimeScale's last reconciles
    left, which the loop forgets), `owners` (which RuntimeScale owns each runtime, which the loop keeps current),
    `retries` (whether a failure is the first of a retried run) and `throttle` (a server's `Retry-After`, which
    holds the whole bridge). The lines about what a pass wrote (`news`) are said by the loop after the pass."""

    def __init__(
        self,
        client: ReconcileClient,
        *,
        memory: dict[ScaleId, ScaleMemory],
        owners: RuntimeOwners,
        retries: RetrySchedule,
        throttle: ServerThrottle,
        resync_interval_s: float,
        metrics: AdapterMetrics | None,
        may_write: Callable[[], bool],
        clock: Callable[[], float],
    ) -> None:
        self._client = client
        self._memory = memory
        self._owners = owners
        self._retries = retries
        self._throttle = throttle
        self._resync_interval_s = resync_interval_s
        self._metrics = metrics
        self._may_write = may_write
        self._clock = clock
        self._reason_changes = ReasonChanges()  # new Ready reasons, logged after a pass
        self._writes = PassWrites()  # replicas carried and adopted, logged after a pass

    def fought(self, fight: Fight) -> None:
        """Say `fight` with the pass's other news (`PassWrites.fought`)."""
        self._writes.fought(fight)

    def flush_news(self) -> None:
        """Log what the pass wrote and the Ready reasons that changed (`bridge_news`), once the pass is over."""
        self._writes.flush()
        self._reason_changes.flush()

    async def reconcile(self, key: ScaleId, scale: JSON, known: Listed | None) -> int:
        """Reconcile RuntimeScale `key` as `scale` reads; returns the writes made. `known`: the full pass's lists
        (None: read the ServingRuntime and Deployment now). Raises the `KubeApiError` that stopped it (the loop
        retries it) and `NotLeading` where this replica stopped leading before a write."""
        namespace = key[0]
        runtime_name = (scale.get("spec") or {}).get("servingRuntime")
        owner = self._owners.owner((namespace, runtime_name)) if isinstance(runtime_name, str) else None
        if owner is not None and owner != key:
            return await self._refuse_duplicate(key, scale, owner, known)
        runtime = deployment = None
        cluster_runtime = False
        if isinstance(runtime_name, str) and runtime_name:
            if known is not None and known.runtimes is not None:
                runtime = known.runtimes.get((namespace, runtime_name))
            else:
                try:
                    runtime = await self._client.get_custom(SERVING_RUNTIMES, namespace, runtime_name)
                except KubeApiError as error:
                    await self._report_not_read(key, scale, known, error)
                    raise
            if runtime is None:
                cluster_runtime = await self._cluster_runtime_exists(runtime_name)
            else:
                deployment = await self._deployment(key, scale, known)
        writes = 0
        classed = runtime is not None and autoscaler_class(runtime) is not None
        self._remember(key).classed = scale if classed else None
        if runtime is not None:
            self._note_misplaced(key, runtime, deployment, deployment_name(scale))
            if not classed:
                scale, writes = await self._carry_replicas(key, scale, runtime, deployment)
        outcome = verdict(scale, runtime, deployment, cluster_runtime=cluster_runtime)
        # A runtime left to its autoscaler class: no selector, or an HPA on this RuntimeScale and the class's own
        # CPU HPA select the same pods, and the HPA controller stops both (`AmbiguousSelector`).
        return writes + await self._write_status(key, scale, deployment, outcome, selects_pods=not classed)

    async def _carry_replicas(self, key: ScaleId, scale: JSON, runtime: JSON,
                              deployment: JSON | None) -> tuple[JSON, int]:
        """Carry the RuntimeScale's `spec.replicas` to its ServingRuntime `runtime` (first adopting the runtime's
        replicas where the RuntimeScale has none); returns the RuntimeScale afterwards and the writes made."""
        namespace, name = key
        runtime_name = str((scale.get("spec") or {}).get("servingRuntime"))
        memory = self._remember(key)
        writes = 0
        wanted = replicas_of(scale)
        if wanted is None:
            adopted = replicas_of(runtime)
            if adopted is None and replicas_of(deployment) != 0:
                # A Deployment at 0 is modelmesh-serving's scale to zero, not the runtime's size: adopted
                # and carried back, 0 would keep the runtime at 0 once an InferenceService comes.
                adopted = replicas_of(deployment)
            if adopted is not None:
                scale, writes = await self._adopt(key, scale, adopted)
                wanted = replicas_of(scale)
        memory.note_reconciled(scale)
        memory.scale = scale
        memory.ask(runtime_name, wanted)
        memory.refused_at = None
        found = replicas_of(runtime)
        if wanted is not None and found != wanted:
            try:
                await self._patch("servingruntime_replicas", SERVING_RUNTIMES, namespace, runtime_name,
                                  {"spec": {"replicas": wanted}})
            except KubeApiError as error:
                memory.refused_at = (runtime_name, found)  # the runtime's events at `found` wait for the retry
                await self._report_not_written(key, scale, deployment, found, error)
                raise
            writes += 1
            uid = _uid(runtime)
            if (memory.carried == (runtime_name, wanted) and memory.carried_uid is not None
                    and memory.carried_uid != uid):
                log.info("ServingRuntime %s/%s was deleted and created again (a new object, with spec.replicas %s): "
                         "set to %d, what RuntimeScale %s/%s asks (its HPA decides the runtime's replicas)",
                         namespace, runtime_name, shown_replicas(found), wanted, namespace, name)
            elif (memory.carried if memory.carried is not None else bridged_spec(scale)) == (runtime_name, wanted):
                if self._metrics is not None:
                    self._metrics.bridge_set_backs.inc()
                if memory.set_back_level(found, self._clock()) == logging.WARNING:
                    self._writes.set_back(key, runtime_name, found, wanted)  # said with the pass's others
                else:
                    log.debug("%s", set_back_line(key, runtime_name, found, wanted))
            else:
                self._writes.carried(key, runtime_name, found, wanted)
        if wanted is None:
            memory.carried = memory.carried_uid = None
        else:
            memory.carried = (runtime_name, wanted)
            if (uid := _uid(runtime)) is not None:
                memory.carried_uid = uid
        return scale, writes

    async def _refuse_duplicate(self, key: ScaleId, scale: JSON, owner: ScaleId, known: Listed | None) -> int:
        """A RuntimeScale whose runtime an older one owns: nothing is written to the runtime or adopted from it;
        its status says which RuntimeScale owns the runtime, and its `status.replicas` still mirrors the
        Deployment (what `kubectl get runtimescale` shows is what runs), but it has no `status.selector`: the HPA
        controller stops every HPA whose pods two scales select, the owner's too. Logged once, as its Ready
        reason changes."""
        self._remember(key).forget_carried()
        deployment = await self._deployment(key, scale, known)
        claim = self._owners.claim(owner)
        outcome = duplicate(scale, owner[1], "" if claim is None else claim.created)
        return await self._write_status(key, scale, deployment, outcome, selects_pods=False)

    async def _deployment(self, key: ScaleId, scale: JSON, known: Listed | None) -> JSON | None:
        """The runtime's Deployment: from the full pass's list, else read now (not listed: a pass for one
        RuntimeScale, or a Deployment without the labels modelmesh-serving gives its own)."""
        listed = None if known is None or known.deployments is None else known.deployments.get(
            (key[0], deployment_name(scale)))
        return listed if listed is not None else await self._client.get_deployment(key[0], deployment_name(scale))

    async def _adopt(self, key: ScaleId, scale: JSON, adopted: int) -> tuple[JSON, int]:
        """Write `adopted` (the runtime's replicas) into the `spec.replicas` the RuntimeScale lacks; returns the
        RuntimeScale afterwards and the writes made.

        Only into the version that was read without replicas (its resourceVersion is the patch's precondition):
        a list or watch event can be older than a value the HPA, KEDA or a user has set since (a new leader's
        late event, a leader that has just lost its Lease), and adopting over it replaced their decision with
        the runtime's old size. On a conflict the RuntimeScale is read again: replicas set meanwhile are kept,
        and a RuntimeScale that still has none (only its metadata changed) is adopted into that version."""
        try:
            return await self._write_adopted(key, scale, adopted), 1
        except KubeApiError as error:
            if error.status != 409:
                raise
            fresh = await self._client.get_custom(RUNTIME_SCALES, *key)
            if fresh is None:
                raise
        found = replicas_of(fresh)
        if found is not None:
            log.info("RuntimeScale %s/%s: spec.replicas was set to %d while the adapter adopted the runtime's %d: "
                     "kept", *key, found, adopted)
            return fresh, 0
        return await self._write_adopted(key, fresh, adopted), 1

    async def _write_adopted(self, key: ScaleId, scale: JSON, adopted: int) -> JSON:
        """The adoption's merge patch, conditional on `scale`'s resourceVersion (409 when it changed since)."""
        patch: JSON = {"spec": {"replicas": adopted}}
        version = (scale.get("metadata") or {}).get("resourceVersion")
        if isinstance(version, str) and version:
            patch["metadata"] = {"resourceVersion": version}
        result = await self._patch("runtimescale_replicas", RUNTIME_SCALES, *key, patch)
        self._writes.adopted(key, adopted)
        return result

    async def _write_status(self, key: ScaleId, scale: JSON, deployment: JSON | None, outcome: Verdict, *,
                            selects_pods: bool = True) -> int:
        """Note `outcome` (log, Ready gauge) and write the status it gives when it differs; returns the writes.
        `selects_pods` False: no `status.selector` (`desired_status`)."""
        namespace, name = key
        memory = self._remember(key)
        if memory.reason != outcome.reason:
            self._reason_changes.changed(key, outcome)
            memory.reason = outcome.reason
        if self._metrics is not None:
            self._metrics.set_runtime_scale_ready(namespace, name, outcome.ready, outcome.reason)
        status = desired_status(scale, deployment, outcome, rfc3339(time.time()), selects_pods=selects_pods)
        old = scale.get("status") or {}
        if {field: old.get(field) for field in status} != status:
            await self._patch("runtimescale_status", RUNTIME_SCALES, namespace, name, {"status": status},
                              subresource="status")
            return 1
        return 0

    async def _report_not_written(self, key: ScaleId, scale: JSON, deployment: JSON | None, found: int | None,
                                  error: KubeApiError) -> None:
        """The runtime does not follow the RuntimeScale: say so in its status, at once when the write is refused
        (403: RBAC, waits for the resync), from the second failure in a row when it is retried (one 409 or 503
        retried a second later would flap Ready). Best effort: the write's own failure is what is retried.

        Also while a 429's `Retry-After` holds the bridge (this write's own 429 set it): skipping the status then
        left a runtime throttled pass after pass `Bridged` for good. It is one write per hold, the pass stops
        here."""
        if self._retries.first_retried(key, error):
            return
        outcome = not_written(scale, found, error, forbidden=error.status == 403, retried=error.retryable,
                              resync_s=self._resync_interval_s)
        with contextlib.suppress(KubeApiError):
            await self._write_status(key, scale, deployment, outcome)

    async def _report_not_read(self, key: ScaleId, scale: JSON, known: Listed | None, error: KubeApiError) -> None:
        """The ServingRuntime could not be read, so nothing is written to it: say so in the status, when
        `_report_not_written` would (at once for a refusal, from the second failure in a row for one retried).
        Without it the last verdict stayed, `Bridged` and its gauge at 1, while the HPA's replicas reached
        nothing: a ClusterRole without get/list on ServingRuntimes fired no alert. Best effort, as there: the
        read's own failure is what is retried (and where the Deployment cannot be read either, nothing is said)."""
        if self._retries.first_retried(key, error):
            return
        outcome = not_read(scale, error, forbidden=error.status == 403, retried=error.retryable,
                           resync_s=self._resync_interval_s)
        with contextlib.suppress(KubeApiError):  # the Deployment: the status's replicas and selector, still read
            await self._write_status(key, scale, await self._deployment(key, scale, known), outcome)

    def _note_misplaced(self, key: ScaleId, runtime: JSON, deployment: JSON | None, deployment_called: str) -> None:
        """Warn once per change when the ServingRuntime, the object users edit, carries policy annotations its
        Deployment does not: the adapter reads the Deployment's only, and the user believes they apply."""
        memory = self._remember(key)
        misplaced = tuple(sorted(misplaced_policy_annotations(runtime, deployment).items()))
        if misplaced and memory.misplaced != misplaced:
            meta = runtime.get("metadata") or {}
            written = ", ".join(f"{name}={value!r}" for name, value in misplaced)
            log.warning("ServingRuntime %s/%s has %s, which the adapter does not read: policy annotations apply "
                        "on the runtime's Deployment %s/%s (annotate it, where your modelmesh-serving controller "
                        "keeps its annotations) or in a runtimes: entry of the policy file",
                        meta.get("namespace") or key[0], meta.get("name"), written, key[0], deployment_called)
        memory.misplaced = misplaced

    async def _cluster_runtime_exists(self, name: str) -> bool:
        try:
            return await self._client.get_custom(CLUSTER_SERVING_RUNTIMES, None, name) is not None
        except KubeApiError as error:
            if error.status in (403, 404):  # not allowed to look, or the CRD is not installed: say "not found"
                return False
            raise

    def _remember(self, key: ScaleId) -> ScaleMemory:
        """The RuntimeScale's memory, a new one where it has none."""
        memory = self._memory.get(key)
        if memory is None:
            memory = self._memory[key] = ScaleMemory()
        return memory

    async def _patch(self, write: BridgeWrite, resource: CustomResource, namespace: str, name: str, patch: JSON,
                     subresource: str | None = None) -> JSON:
        """One merge patch, counted by what it writes and how it ended; none once this replica stopped leading
        (`NotLeading`): one reconcile makes up to three writes, and the Lease's safety margin covers one call
        in flight at the renew deadline, not the ones after it."""
        if not self._may_write():
            raise NotLeading(f"{resource.plural} {namespace}/{name} not written: this replica stopped leading")
        try:
            result = await self._client.merge_patch_custom(resource, namespace, name, patch, subresource=subresource)
        except KubeApiError as error:
            if self._metrics is not None:
                self._metrics.bridge_wrote(write, "retried" if error.retryable else "failed")
            self._throttle.note(error)
            raise
        if self._metrics is not None:
            self._metrics.bridge_wrote(write, "ok")
        version = (result.get("metadata") or {}).get("resourceVersion")
        if resource is RUNTIME_SCALES and isinstance(version, str):
            self._remember((namespace, name)).wrote(version)
        return result


def _uid(obj: JSON) -> str | None:
    """The object's `metadata.uid`, which a deleted and created again object does not keep."""
    uid = (obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else None

