"""The fence between a leader's writes and the release of its Lease (docs/operations.md, Upgrading).

Why: on a clean stop (SIGTERM in a rollout, a node drain) the leader releases its Lease, and a follower takes over
at its next try, a fraction of a second later. A write the old leader had sent just before (a pod's deletion
cost, `ServingRuntime.spec.replicas`) used to be cancelled on the client side only: the API server may still
apply it, after the new leader's write of the same object, and the old leader's stale value won (for a cost until
the new leader's 5-minute check; for replicas until its next resync, with pods removed and started again
meanwhile). The renew deadline's margin covers a leader that stops by not renewing; a release has no margin.

So stopping goes through a `WriteFence`: `drain()` closes it (no write starts from then on: `open` is part of
`may_write`), waits until every write in flight has been answered, at most a bound the caller gives (one client
timeout: every call ends by then), and says whether all were answered. Only then is the Lease released; a write
that got no answer (it timed out, or was still in flight at the bound) may still land, so the caller leaves the
Lease to expire instead. So may one that timed out shortly before the drain: a write that ended unanswered
within that bound before it counts too (one that timed out a moment before SIGTERM landed 5 s later, after
the new leader's, and was taken for a hand edit). `FencedClient` is the writers' Kubernetes client with every
write counted.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from autoscaler.kube.client import CustomResource, KubeClient
from autoscaler.kube.errors import KubeApiError

JSON = dict[str, Any]
T = TypeVar("T")


class WriteFence:
    """Counts the writes in flight; once closed, says whether each of them was answered."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.open = True
        """False once `drain()` started: no write may start (the writers check `may_write` just before sending)."""
        self._clock = clock
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._unanswered = 0  # writes that ended without an answer after the fence closed
        self._last_unanswered_at = -math.inf  # when one last did while it was open

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def write(self, call: Awaitable[T]) -> T:
        """Await one write, counted while in flight."""
        self._in_flight += 1
        self._idle.clear()
        answered = False
        try:
            result = await call
            answered = True
            return result
        except KubeApiError as error:
            answered = error.status is not None  # a status is an answer; a timeout or a cut connection is not
            raise
        finally:
            self._in_flight -= 1
            if not answered:
                if self.open:
                    self._last_unanswered_at = self._clock()
                else:
                    self._unanswered += 1
            if self._in_flight == 0:
                self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Close the fence and wait (at most `timeout_s`) for the writes in flight; True when every one of them
        was answered, and none went unanswered in the `timeout_s` before, so none can land later."""
        self.open = False
        if self._clock() - self._last_unanswered_at <= timeout_s:
            self._unanswered += 1
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            return False
        return self._unanswered == 0


class FencedClient:
    """The Kubernetes calls of the deletion-cost writer and the replica bridge, writes counted by `fence`."""

    def __init__(self, client: KubeClient, fence: WriteFence) -> None:
        self._client = client
        self._fence = fence

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        await self._fence.write(self._client.patch_pod_annotations(namespace, name, annotations))

    async def merge_patch_custom(
        self, resource: CustomResource, namespace: str, name: str, patch: JSON, *, subresource: str | None = None
    ) -> JSON:
        return await self._fence.write(
            self._client.merge_patch_custom(resource, namespace, name, patch, subresource=subresource))

    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON:
        return await self._client.list_custom(resource, namespace)

    async def list_deployments(self, namespace: str | None, label_selector: str) -> JSON:
        return await self._client.list_deployments(namespace, label_selector)

    async def get_custom(self, resource: CustomResource, namespace: str | None, name: str) -> JSON | None:
        return await self._client.get_custom(resource, namespace, name)

    async def get_deployment(self, namespace: str, name: str) -> JSON | None:
        return await self._client.get_deployment(namespace, name)
