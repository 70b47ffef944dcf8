"""The replica bridge (docs/design.md): the HPA scales a `RuntimeScale`; the adapter's leader carries its
`spec.replicas` to `ServingRuntime.spec.replicas`, which every modelmesh-serving release applies to the runtime
Deployment, and reports the Deployment back in the RuntimeScale's `status` (replicas, selector, conditions).

Why not let the HPA scale the Deployment: the modelmesh-serving controller sets the Deployment's replicas from
the ServingRuntime on every reconcile and reconciles on every change of the Deployment, so an HPA's change is
reverted at once; its webhook rejects unknown autoscaler classes and class `hpa` adds a second HPA.

How (`ReplicaBridge`): a pass lists the RuntimeScales of the watched namespaces and, for each, reads its
ServingRuntime and Deployment, then writes only what differs: a merge patch of `ServingRuntime.spec.replicas`,
a merge patch of the RuntimeScale's `status` subresource, and (once, for a RuntimeScale created without
replicas) its `spec.replicas` adopted from the runtime so that the HPA's first read of the scale works. A pass
runs when a RuntimeScale changes (`RuntimeScaleWatch` wakes it: the HPA's write reaches the runtime within a
round trip), every `resync_interval_s` (Deployment replicas change without touching the RuntimeScale), and when a
retry falls due. It runs on its own task, so a slow API server never delays a refresh or an HPA request.
Failures are per RuntimeScale: 409/429/5xx and no answer are retried with exponential backoff and jitter
(honouring `Retry-After`), others (403: RBAC) wait for the next resync. Only the leader writes; all state lives
in the cluster, so a new leader (or a restarted adapter) simply carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from autoscaler.actuation.bridge_status import (
    CLUSTER_SERVING_RUNTIMES,
    RUNTIME_SCALES,
    SERVING_RUNTIMES,
    autoscaler_class,
    deployment_name,
    desired_status,
    replicas_of,
    verdict,
)
from autoscaler.kube.backoff import retry_delay
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError
from autoscaler.log_lists import NAMED, few
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)

JSON = dict[str, Any]
ScaleId = tuple[str, str]
"""(namespace, name) of a RuntimeScale."""


class BridgeClient(Protocol):
    """What the bridge needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it)."""

    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON: ...

    async def get_custom(self, resource: CustomResource, namespace: str | None, name: str) -> JSON | None: ...

    async def get_deployment(self, namespace: str, name: str) -> JSON | None: ...

    async def merge_patch_custom(
        self, resource: CustomResource, namespace: str, name: str, patch: JSON, *, subresource: str | None = None
    ) -> JSON: ...


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    resync_interval_s: float = 15.0
    """Every RuntimeScale is reconciled at least this often (seconds): the HPA's sync period, so the
    `status.replicas` it reads is at most one period old."""
    backoff_base_s: float = 1.0
    """First retry delay after a retryable failure; doubles with each further failure."""
    backoff_cap_s: float = 60.0
    """Longest retry delay."""


@dataclass(slots=True)
class _Retry:
    failures: int = 0
    retry_at: float = 0.0


class ReplicaBridge:
    """Keeps every watched RuntimeScale and its ServingRuntime in step; run `run()` as its own task."""

    def __init__(
        self,
        client: BridgeClient,
        *,
        namespaces: Sequence[str] = (),
        settings: BridgeSettings | None = None,
        metrics: AdapterMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """`namespaces` to reconcile RuntimeScales in; empty: all namespaces."""
        self._client = client
        self.scopes: tuple[str | None, ...] = tuple(namespaces) or (None,)
        self.settings = settings or BridgeSettings()
        self._metrics = metrics
        self._may_write = may_write
        self._clock = clock
        self._rand = rand
        self._wake = asyncio.Event()
        self._retries: dict[ScaleId, _Retry] = {}
        self._reasons: dict[ScaleId, str] = {}
        self._changed: list[tuple[bool, ScaleId, str, str]] = []  # this pass's new Ready reasons, logged at its end
        self._last_error: str | None = None
        self._passed_at = -math.inf  # when the last pass started: retries due by then were looked at

    def wake(self) -> None:
        """Reconcile now (a RuntimeScale changed, or leadership did)."""
        self._wake.set()

    async def run(self) -> None:
        """Reconcile on every wake-up, every resync interval and when a retry falls due, until cancelled."""
        while True:
            try:
                await self.sync()
            except Exception:
                log.exception("replica bridge pass failed; trying again at the next resync")
            try:
                async with asyncio.timeout(self._sleep_s()):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def sync(self) -> int:
        """One pass over every RuntimeScale; returns the number of writes made. The RuntimeScales whose
        `Ready` reason changed are logged at the end of the pass: one line each, or, when more than ten changed
        (the first pass of every new leader finds them all), one line per reason with how many."""
        try:
            return await self._sync()
        finally:
            self._log_changed_reasons()

    def _log_changed_reasons(self) -> None:
        changed, self._changed = self._changed, []
        if len(changed) <= NAMED:
            for ready, key, reason, message in changed:
                log.log(logging.INFO if ready else logging.WARNING, "RuntimeScale %s/%s: %s: %s", *key, reason,
                        message)
            return
        by_reason: dict[tuple[bool, str], list[tuple[ScaleId, str]]] = defaultdict(list)
        for ready, key, reason, message in changed:
            by_reason[ready, reason].append((key, message))
        for (ready, reason), scales in by_reason.items():
            level = logging.INFO if ready else logging.WARNING
            (namespace, name), message = scales[0]
            if len(scales) == 1:
                log.log(level, "RuntimeScale %s/%s: %s: %s", namespace, name, reason, message)
                continue
            log.log(level, "%d RuntimeScales now %s: %s (e.g. %s/%s: %s)", len(scales), reason,
                    few([f"{key[0]}/{key[1]}" for key, _ in scales]), namespace, name, message)

    async def _sync(self) -> int:
        if not self._may_write():
            self._retries.clear()
            for key in list(self._reasons):
                self._forget(key)
            return 0
        self._passed_at = self._clock()
        writes = 0
        seen: set[ScaleId] = set()
        unlisted: set[str | None] = set()  # scopes whose list failed: what they hold is unknown, not gone
        for scope in self.scopes:
            try:
                listed = await self._client.list_custom(RUNTIME_SCALES, scope)
            except KubeApiError as error:
                self._warn(f"cannot list RuntimeScales in {scope or 'all namespaces'}: {error}")
                unlisted.add(scope)
                continue
            for scale in listed.get("items") or []:
                if not isinstance(scale, dict):
                    continue
                meta = scale.get("metadata") or {}
                key = (str(meta.get("namespace") or scope or ""), str(meta.get("name") or ""))
                seen.add(key)
                retry = self._retries.get(key)
                if retry is not None and retry.retry_at > self._clock():
                    continue
                if not self._may_write():
                    return writes
                writes += await self._reconcile_guarded(key, scale)
        if None in unlisted:
            return writes
        for key in {*self._reasons, *self._retries} - seen:
            if key[0] not in unlisted:
                self._forget(key)
                self._retries.pop(key, None)
        return writes

    def _forget(self, key: ScaleId) -> None:
        self._reasons.pop(key, None)
        if self._metrics is not None:
            with contextlib.suppress(KeyError):
                self._metrics.runtime_scale_ready.remove(*key)

    async def _patch(self, write: str, resource: CustomResource, namespace: str, name: str, patch: JSON,
                     subresource: str | None = None) -> JSON:
        """One merge patch, counted by what it writes and how it ended."""
        try:
            result = await self._client.merge_patch_custom(resource, namespace, name, patch, subresource=subresource)
        except KubeApiError as error:
            if self._metrics is not None:
                self._metrics.bridge_writes.labels(write, "retried" if error.retryable else "failed").inc()
            raise
        if self._metrics is not None:
            self._metrics.bridge_writes.labels(write, "ok").inc()
        return result

    async def _reconcile_guarded(self, key: ScaleId, scale: JSON) -> int:
        try:
            writes = await self._reconcile(key, scale)
        except KubeApiError as error:
            self._failed(key, error)
            return 0
        self._retries.pop(key, None)
        self._last_error = None
        return writes

    async def _reconcile(self, key: ScaleId, scale: JSON) -> int:
        namespace, name = key
        runtime_name = (scale.get("spec") or {}).get("servingRuntime")
        runtime = deployment = None
        cluster_runtime = False
        if isinstance(runtime_name, str) and runtime_name:
            runtime = await self._client.get_custom(SERVING_RUNTIMES, namespace, runtime_name)
            if runtime is None:
                cluster_runtime = await self._cluster_runtime_exists(runtime_name)
            else:
                deployment = await self._client.get_deployment(namespace, deployment_name(scale))
        writes = 0
        if runtime is not None and autoscaler_class(runtime) is None:
            wanted = replicas_of(scale)
            if wanted is None:
                adopted = replicas_of(runtime) if replicas_of(runtime) is not None else replicas_of(deployment)
                if adopted is not None:
                    scale = await self._patch("runtimescale_replicas", RUNTIME_SCALES, namespace, name,
                                              {"spec": {"replicas": adopted}})
                    writes += 1
                    log.info("RuntimeScale %s/%s: spec.replicas adopted from the runtime: %d", *key, adopted)
                    wanted = adopted
            if wanted is not None and replicas_of(runtime) != wanted:
                await self._patch("servingruntime_replicas", SERVING_RUNTIMES, namespace, str(runtime_name),
                                  {"spec": {"replicas": wanted}})
                writes += 1
                log.info("RuntimeScale %s/%s: ServingRuntime %s spec.replicas %s -> %d",
                         namespace, name, runtime_name, replicas_of(runtime), wanted)
        outcome = verdict(scale, runtime, deployment, cluster_runtime=cluster_runtime)
        if self._reasons.get(key) != outcome.reason:
            self._changed.append((outcome.ready, key, outcome.reason, outcome.message))
            self._reasons[key] = outcome.reason
        if self._metrics is not None:
            self._metrics.runtime_scale_ready.labels(namespace, name).set(1 if outcome.ready else 0)
        status = desired_status(scale, deployment, outcome, _rfc3339_now())
        old = scale.get("status") or {}
        if {field: old.get(field) for field in status} != status:
            await self._patch("runtimescale_status", RUNTIME_SCALES, namespace, name, {"status": status},
                              subresource="status")
            writes += 1
        return writes

    async def _cluster_runtime_exists(self, name: str) -> bool:
        try:
            return await self._client.get_custom(CLUSTER_SERVING_RUNTIMES, None, name) is not None
        except KubeApiError as error:
            if error.status in (403, 404):  # not allowed to look, or the CRD is not installed: say "not found"
                return False
            raise

    def _failed(self, key: ScaleId, error: KubeApiError) -> None:
        retry = self._retries.setdefault(key, _Retry())
        retry.failures += 1
        now = self._clock()
        if error.retryable:
            retry.retry_at = now + retry_delay(retry.failures, self.settings.backoff_base_s,
                                               self.settings.backoff_cap_s, self._rand(), error.retry_after_s)
        else:
            retry.retry_at = now + self.settings.resync_interval_s
        self._warn(f"RuntimeScale {key[0]}/{key[1]} not reconciled (next try in {retry.retry_at - now:.0f} s): "
                   f"{error}", kind=str(error.status))

    def _warn(self, message: str, kind: str | None = None) -> None:
        level = logging.WARNING if (kind or message) != self._last_error else logging.DEBUG
        self._last_error = kind or message
        log.log(level, "replica bridge: %s", message)

    def _sleep_s(self) -> float:
        """Until the resync or the next retry the last pass did not look at: one due by then was tried, or its
        scope could not be listed, which the resync (or a watch event) tries again; not in a tight loop."""
        now = self._clock()
        due = [retry.retry_at - now for retry in self._retries.values() if retry.retry_at > self._passed_at]
        return max(0.0, min([self.settings.resync_interval_s, *due]))


def _rfc3339_now() -> str:
    """`metav1.Time` as the API server writes it: UTC, whole seconds, `Z`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

