"""`RuntimeScaleWatch`: wakes the replica bridge as soon as a RuntimeScale changes, so the HPA's write to the
scale subresource reaches `ServingRuntime.spec.replicas` within a round trip instead of a resync interval.

It only signals; the bridge reads what it needs itself. A list gives the resourceVersion to watch from; a watch
that ends is resumed from the last version seen; one the server no longer retains (410, as an ERROR event or a
status) is replaced by a fresh list; other failures back off (capped, jittered) and the bridge's own resync
covers the gap. Every (re)list also wakes the bridge: events may have been missed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import Any, Protocol

import aiohttp

from autoscaler.actuation.bridge_status import RUNTIME_SCALES
from autoscaler.kube.backoff import exponential_delay
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError, WatchExpiredError
from autoscaler.kube.raw import describe, status_error

log = logging.getLogger("autoscaler.actuation.bridge")

JSON = dict[str, Any]


class WatchClient(Protocol):
    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON: ...

    async def watch_custom(
        self, resource: CustomResource, namespace: str | None, resource_version: str, timeout_s: int
    ) -> aiohttp.ClientResponse: ...


class RuntimeScaleWatch:
    """Lists then watches the RuntimeScales of one scope (`run`), calling `on_change()` on every event."""

    def __init__(
        self,
        client: WatchClient,
        scope: str | None,
        on_change: Callable[[], None],
        *,
        watch_timeout_s: int = 300,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
    ) -> None:
        self._client = client
        self.scope = scope
        self._on_change = on_change
        self._watch_timeout_s = watch_timeout_s
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s

    async def run(self) -> None:
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    listed = await self._client.list_custom(RUNTIME_SCALES, self.scope)
                    version = str((listed.get("metadata") or {}).get("resourceVersion") or "") or None
                    self._on_change()
                    if version is None:
                        raise KubeApiError("list runtimescales: the answer has no resourceVersion")
                version = await self._follow(version)
                failures = 0
            except WatchExpiredError:
                version = None
            except Exception as error:
                if not isinstance(error, KubeApiError):
                    log.exception("replica bridge: unexpected error watching RuntimeScales")
                failures += 1
                version = None
                delay = exponential_delay(failures, self._backoff_base_s, self._backoff_cap_s)
                log.debug("replica bridge: RuntimeScale watch failed (retry in %.1f s): %s", delay, error)
                await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))

    async def _follow(self, version: str) -> str:
        """One watch request until the server ends it; returns the newest resourceVersion seen."""
        what = f"watch runtimescales in {self.scope or 'all namespaces'}"
        response = await self._client.watch_custom(RUNTIME_SCALES, self.scope, version, self._watch_timeout_s)
        try:
            while True:
                try:
                    line = await response.content.readline()
                except Exception as error:
                    raise KubeApiError(f"{what}: stream broken: {describe(error)}") from error
                if not line:
                    return version
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as error:
                    raise KubeApiError(f"{what}: undecodable event: {line[:200]!r}") from error
                obj = event.get("object") if isinstance(event, dict) else None
                if not isinstance(obj, dict):
                    raise KubeApiError(f"{what}: unexpected event: {line[:200]!r}")
                if event.get("type") == "ERROR":
                    raise status_error(what, int(obj.get("code") or 500), obj)
                seen = (obj.get("metadata") or {}).get("resourceVersion")
                version = seen if isinstance(seen, str) and seen else version
                if event.get("type") != "BOOKMARK":
                    self._on_change()
        finally:
            response.release()
