"""The deletion-cost writer's PATCHes and their retries (`CostPatches`): paced, a few in flight, off the serving
path.

A pass writes with `concurrency` requests in flight and at most `qps` a second, so a slow API server delays only
the writer's task: never a refresh, never an HPA request. 404 means the pod is gone (normal: it was just
removed); 409, 429 and 5xx (and no answer) are retried with exponential backoff and jitter, honouring
`Retry-After`; other refusals (403: missing RBAC) wait for the 5-minute refresh. A PATCH the server never answered
(refused, timed out) backs off to about 4 s only (`backoff.UNANSWERED_MAX_S`, as the watches and the bridge's
writes), so a cost changed during an outage lands within seconds of its end; an answered failure to the 60 s cap,
counting only the answered failures in a row (`backoff.FailuresInARow`). A `Retry-After` (API Priority
and Fairness throttles the adapter's whole flow, not one pod) also pauses every other patch of the writer for
that long. Each failure is said with its pass's others (`autoscaler.actuation.deletion_cost_news`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from autoscaler.actuation.deletion_cost_foreign import ForeignCosts
from autoscaler.actuation.deletion_cost_memory import WrittenCosts
from autoscaler.actuation.deletion_cost_news import FailureNews
from autoscaler.actuation.deletion_cost_plan import PodId, PodPatch, PodRecord
from autoscaler.kube.backoff import UNANSWERED_MAX_S, ServerThrottle, retry_delay, unanswered
from autoscaler.kube.client import KubeApiError
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.selfmetrics_deletion_costs import DeletionCostPatchResult

log = logging.getLogger("autoscaler.actuation.deletion_cost")


class PodAnnotator(Protocol):
    """What the writer needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it)."""

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None: ...


class CostPatches:
    """Sends the patches a pass planned and takes their answers into the records (`WrittenCosts`)."""

    def __init__(
        self,
        client: PodAnnotator,
        metrics: AdapterMetrics,
        memory: WrittenCosts,
        foreign: ForeignCosts,
        *,
        qps: float | None,
        concurrency: int,
        backoff_base_s: float,
        backoff_cap_s: float,
        gone_wait_s: float,
        refused_wait_s: float,
        clock: Callable[[], float],
        rand: Callable[[], float],
    ) -> None:
        """`gone_wait_s`: how long a pod found gone (404) is left alone (`WriterSettings.min_interval_s`);
        `refused_wait_s`: until a refused write is tried again (`WriterSettings.max_interval_s`). The rest as
        `WriterSettings` says."""
        self._client = client
        self._metrics = metrics
        self._memory = memory
        self._foreign = foreign
        self._qps = qps
        self._concurrency = concurrency
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._gone_wait_s = gone_wait_s
        self._refused_wait_s = refused_wait_s
        self._clock = clock
        self._rand = rand
        self.news = FailureNews()
        self._next_slot = 0.0
        # No patch before the server's Retry-After has passed (real time: this is about load, not policy).
        self.throttle = ServerThrottle(backoff_cap_s)
        self._in_flight: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """PATCHes sent whose answer the writer has not taken in yet."""
        return len(self._in_flight)

    def cancel(self) -> None:
        """Cancel the patches in flight (leadership lost)."""
        for task in list(self._in_flight):
            task.cancel()

    async def write(self, patches: list[PodPatch], wanted: Callable[[], bool]) -> int:
        """Send `patches` in order while `wanted()` (no newer views, still leading); returns how many were sent."""
        slots = asyncio.Semaphore(self._concurrency)
        tasks: list[asyncio.Task[None]] = []

        async def one(patch: PodPatch) -> None:
            try:
                await self._patch(patch)
            finally:
                slots.release()

        for patch in patches:
            await slots.acquire()
            await self._pace()
            # Checked after every wait, just before sending: leadership may have ended meanwhile.
            if not wanted():
                slots.release()
                break
            task = asyncio.create_task(one(patch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            tasks.append(task)
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        self.news.report()
        for outcome in outcomes:
            if isinstance(outcome, Exception):  # a bug; a cancelled patch (leadership lost) is simply dropped
                raise outcome
        return len(tasks)

    async def _pace(self) -> None:
        """At most `qps` patches a second, spread evenly, and none while the server's Retry-After lasts (real
        time: this is about load, not policy)."""
        while (throttled := self.throttle.remaining()) > 0:  # a 429 may arrive while we wait
            await asyncio.sleep(throttled)
        if self._qps is None:
            return
        now = time.monotonic()
        wait = self._next_slot - now
        self._next_slot = max(now, self._next_slot) + 1.0 / self._qps
        if wait > 0:
            await asyncio.sleep(wait)

    async def _patch(self, patch: PodPatch) -> None:
        pod = (patch.namespace, patch.pod)
        record = self._memory.records.setdefault(pod, PodRecord())
        uid = self._memory.uid(pod)  # read before sending: a pod created again meanwhile is written again next pass
        fought = self._foreign.fighting(pod)  # written again for another writer's value: at its minute from now on
        record.sending, record.sent_echoed = patch.cost, False  # its echo may come before the answer
        try:
            await self._client.patch_pod_annotations(
                patch.namespace, patch.pod, {DELETION_COST_ANNOTATION: str(patch.cost)}
            )
        except KubeApiError as error:
            record.sending = None
            if error.status is None and patch.cost not in record.unanswered:
                record.unanswered += (patch.cost,)
            self._failed(pod, record, error)
            return
        record.cost, record.written_at, record.uid, record.echoed = patch.cost, self._clock(), uid, False
        record.sending, record.unanswered = None, ()
        if record.sent_echoed:
            self._memory.echoed(pod, record)
        record.fought = record.fought or fought
        record.retry_at, record.refused = -math.inf, None
        record.in_a_row.reset()
        self.news.clear(pod)
        self._metrics.deletion_cost_patched("ok")
        self._metrics.pod_deletion_cost.labels(*pod).set(patch.cost)

    def _failed(self, pod: PodId, record: PodRecord, error: KubeApiError) -> None:
        now = self._clock()
        if error.status == 404:
            log.debug("pod %s/%s is gone; no deletion cost to write", *pod)
            self._metrics.deletion_cost_patched("not_found")
            self.remove_series(pod, record)
            self._memory.records[pod] = PodRecord(retry_at=now + self._gone_wait_s)
            self.news.clear(pod)  # nothing left to write
            return
        failures = record.in_a_row.failed(error)
        record.refused = status = error.status if error.status is not None else "no answer"
        self.throttle.note(error)
        result: DeletionCostPatchResult
        if error.retryable:
            # A PATCH the server never answered (refused, timed out) costs it nothing: tried again within about 4 s,
            # so that a cost changed during an outage is on its pod within seconds of the server's return, not at a
            # backoff that doubled to its cap through the outage (the ReplicaSet reading the stale cost meanwhile).
            cap_s = min(self._backoff_cap_s, UNANSWERED_MAX_S) if unanswered(error) else self._backoff_cap_s
            record.retry_at = now + retry_delay(failures, self._backoff_base_s, cap_s, self._rand(),
                                                error.retry_after_s)
            result = "retried"
        else:
            record.retry_at = now + self._refused_wait_s
            result = "failed"
        self._metrics.deletion_cost_patched(result)
        self._metrics.deletion_cost_patch_errors.labels(str(error.status) if error.status is not None else "none").inc()
        self.news.failed((status, None if error.retryable else pod[0]), pod, result, record.retry_at - now, error)

    def next_retry_in(self, planned_at: float) -> float | None:
        """Until the next retry the pass that planned at `planned_at` did not look at. One due by then was
        written, cut off (newer views or the batch: the next views plan it) or is no longer wanted (the pod went
        not Ready or stale): planning again before new views arrive would only spin on the event loop that
        serves the HPA."""
        due = [r.retry_at for r in self._memory.records.values() if r.failures and r.retry_at > planned_at]
        return max(0.0, min(due) - self._clock()) if due else None

    def remove_series(self, pod: PodId, record: PodRecord) -> None:
        """Take the pod's `pod_deletion_cost` series out (the pod gone, or forgotten)."""
        if record.cost is not None:
            with contextlib.suppress(KeyError):  # already gone: nothing to remove
                self._metrics.pod_deletion_cost.remove(*pod)
