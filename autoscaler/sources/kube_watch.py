"""`PodWatch`: the ModelMesh pods of one scope, kept current by list + watch as client-go's reflector does.

An HPA request never waits on the API, and 10,000 pods cost one list and one stream: one watch per namespace
(or one cluster-wide watch when discovering in all namespaces) selecting `modelmesh-service`, never one per
pod or per runtime. A watch that ends is resumed from the last resourceVersion seen; one the server no longer
retains (410 Expired, as an ERROR event or a status) is replaced by a fresh list. Any other failure is
retried with the owner's capped, jittered backoff, and while the watch is broken `ok` is False and `pods`
stay as last seen, so nothing is lowered on stale knowledge (docs/design.md, Missing data).

Logs go to pod discovery's logger (`autoscaler.sources.kube_pods`), the one operators filter on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes.aio.client import ApiClient, CoreV1Api

from autoscaler.kube.errors import KubeApiError, WatchExpiredError
from autoscaler.kube.raw import (
    Scope,
    describe,
    read_body,
    read_json,
    scope_name,
    status_error,
)
from autoscaler.sources.kube_objects import PodRecord, parse_pod

log = logging.getLogger("autoscaler.sources.kube_pods")

PodName = tuple[str, str]
"""(namespace, name): a pod's identity in `PodWatch.pods`."""


class PodWatch:
    """Lists then watches the pods of one scope forever (`run`); `pods` is what it last saw."""

    def __init__(
        self,
        scope: Scope,
        client: Callable[[], ApiClient],
        *,
        label_selector: str,
        request_timeout_s: float,
        watch_timeout_s: int,
        backoff: Callable[[int], float],
        on_change: Callable[[], None],
    ) -> None:
        """`client` returns the started API client (it raises `KubeApiError` when there is none).

        `request_timeout_s` bounds the list; `watch_timeout_s` is the server-side `timeoutSeconds` of one
        watch request, which the client-side limit exceeds by `request_timeout_s`. `backoff(n)` is the pause
        after the n-th failure in a row. `on_change()` is called whenever `pods` changed.
        """
        self.scope = scope
        self.pods: dict[PodName, PodRecord] = {}
        self.ok = False
        """False until the first list, and while the watch is failing."""
        self._client = client
        self._label_selector = label_selector
        self._request_timeout_s = request_timeout_s
        self._watch_timeout_s = watch_timeout_s
        self._backoff = backoff
        self._on_change = on_change

    async def run(self, first_attempt: asyncio.Event) -> None:
        """List then watch forever: resume after a clean end, re-list after 410, back off on errors.

        `first_attempt` is set once the first list has succeeded or failed."""
        resource_version: str | None = None
        consistent = False  # the first list may come from the API server's cache; a re-list after 410 may not
        failures = 0
        expiries = 0
        while True:
            try:
                if resource_version is None:
                    resource_version = await self._relist(consistent)
                    self._set_ok(True)
                    first_attempt.set()
                resource_version = await self._watch(resource_version)
                failures = expiries = 0
            except WatchExpiredError as error:
                log.info(
                    "Kubernetes discovery: pod watch of %s expired (%s); listing again", scope_name(self.scope), error
                )
                resource_version = None
                consistent = True
                expiries += 1
                if expiries > 1:  # expired again right after a fresh list: do not hammer the API server
                    await asyncio.sleep(self._backoff(expiries - 1))
            except Exception as error:
                if not isinstance(error, KubeApiError):
                    log.exception(
                        "Kubernetes discovery: unexpected error in the pod watch of %s", scope_name(self.scope)
                    )
                failures += 1
                self._set_ok(False, error)
                first_attempt.set()
                await asyncio.sleep(self._backoff(failures))

    def _set_ok(self, ok: bool, error: Exception | None = None) -> None:
        scope = scope_name(self.scope)
        if ok and not self.ok:
            log.info("Kubernetes discovery: pod watch of %s established", scope)
        elif not ok and self.ok:
            log.warning("Kubernetes discovery: pod watch of %s broken, keeping last inventory: %s", scope, error)
        elif not ok:
            log.debug("Kubernetes discovery: pod watch of %s still failing: %s", scope, error)
        self.ok = ok

    async def _relist(self, consistent: bool) -> str:
        """Replace the pods with a fresh list; returns the list's resourceVersion to watch from."""
        core = CoreV1Api(self._client())
        options: dict[str, Any] = {
            "label_selector": self._label_selector,
            "_request_timeout": self._request_timeout_s,
        }
        if not consistent:
            options["resource_version"] = "0"
        if self.scope is None:
            call = partial(core.list_pod_for_all_namespaces_without_preload_content, **options)
        else:
            call = partial(core.list_namespaced_pod_without_preload_content, self.scope, **options)
        document = await read_json(call, f"list pods in {scope_name(self.scope)}")
        pods: dict[PodName, PodRecord] = {}
        for item in document.get("items") or []:
            pod = parse_pod(item)
            if pod is not None:
                pods[(pod.namespace, pod.name)] = pod
        self.pods = pods
        self._on_change()
        version = (document.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise KubeApiError(f"list pods in {scope_name(self.scope)}: the answer has no resourceVersion")
        return version

    async def _watch(self, resource_version: str) -> str:
        """Follow one watch request until the server ends it; returns the newest resourceVersion seen."""
        core = CoreV1Api(self._client())
        options: dict[str, Any] = {
            "label_selector": self._label_selector,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "watch": True,
            "timeout_seconds": self._watch_timeout_s,
            # The client-side limit is the whole stream; it only catches a server that stopped talking.
            "_request_timeout": float(self._watch_timeout_s) + self._request_timeout_s,
        }
        what = f"watch pods in {scope_name(self.scope)}"
        try:
            if self.scope is None:
                response = await core.list_pod_for_all_namespaces_without_preload_content(**options)
            else:
                response = await core.list_namespaced_pod_without_preload_content(self.scope, **options)
        except Exception as error:
            raise KubeApiError(f"{what}: {describe(error)}") from error
        try:
            if response.status >= 300:
                body = await read_body(response, what)
                raise status_error(what, response.status, body)
            self._set_ok(True)
            while True:
                try:
                    line = await response.content.readline()
                except Exception as error:
                    raise KubeApiError(f"{what}: stream broken: {describe(error)}") from error
                if not line:
                    return resource_version
                if not line.strip():
                    continue
                resource_version = self._apply_event(line, what) or resource_version
        finally:
            response.release()

    def _apply_event(self, line: bytes, what: str) -> str | None:
        """Fold one watch event into `pods`; returns its resourceVersion."""
        try:
            event = json.loads(line)
        except ValueError as error:
            raise KubeApiError(f"{what}: undecodable event: {line[:200]!r}") from error
        if not isinstance(event, dict):
            raise KubeApiError(f"{what}: unexpected event: {line[:200]!r}")
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise KubeApiError(f"{what}: event without object: {line[:200]!r}")
        if kind == "ERROR":
            raise status_error(what, int(obj.get("code") or 500), obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            return version if isinstance(version, str) else None
        pod = parse_pod(obj)
        if pod is None:
            log.debug("Kubernetes discovery: ignoring malformed pod in %s event", kind)
            return version if isinstance(version, str) else None
        key = (pod.namespace, pod.name)
        if kind in ("ADDED", "MODIFIED"):
            if self.pods.get(key) != pod:  # most MODIFIED events (annotation writes, status chatter) change nothing
                self.pods[key] = pod
                self._on_change()
        elif kind == "DELETED":
            if self.pods.pop(key, None) is not None:
                self._on_change()
        else:
            log.debug("Kubernetes discovery: ignoring %r event", kind)
        return version if isinstance(version, str) else None
