"""`DeploymentResync`: pod discovery's runtime table, re-read from the runtimes' Deployments on a timer.

A runtime is a Deployment (docs/design.md). The table holds the configured runtimes (always, even before or
without their Deployment) and, when discovering, every Deployment with the runtime label in the watched
namespaces, each with its `spec.replicas`, policy annotations and pod selector. Deployments change rarely
and carry no load, so they are re-read every resync interval instead of watched. The table is replaced only
when every read worked; while reads fail it stays as last read and `ok` is False (docs/design.md, Missing data).

Logs go to pod discovery's logger (`autoscaler.sources.kube_pods`), the one operators filter on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kubernetes.aio.client import ApiClient, AppsV1Api

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import Scope, read_json, scope_name
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.names import SERVINGRUNTIME_DEPLOYMENT_PREFIX
from autoscaler.sources.kube_objects import (
    RuntimeRecord,
    deployment_key,
    fallback_selector,
    parse_deployment,
    runtime_table,
)

log = logging.getLogger("autoscaler.sources.kube_pods")


class DeploymentResync:
    """Keeps `runtimes` from the Kubernetes Deployments, re-reading them every `resync_interval_s` (`run`)."""

    def __init__(
        self,
        client: Callable[[], ApiClient],
        *,
        static: Sequence[RuntimeKey],
        discover: bool,
        namespaces: Sequence[str] | None,
        label_selector: str,
        resync_interval_s: float,
        request_timeout_s: float,
        backoff: Callable[[int], float],
        on_change: Callable[[], None],
    ) -> None:
        """`client` returns the started API client (it raises `KubeApiError` when there is none).

        `static` runtimes are read by name; with `discover`, Deployments labelled `label_selector` are listed
        in `namespaces` (None: all namespaces). `request_timeout_s` bounds each read; after a failure the next
        try comes after `backoff(n)` for the n-th failure in a row, never later than `resync_interval_s`.
        `on_change()` is called whenever `runtimes` changed.
        """
        self._client = client
        self._static = tuple(static)
        self._discover = discover
        self._namespaces = namespaces
        self._label_selector = label_selector
        self._resync_interval_s = resync_interval_s
        self._request_timeout_s = request_timeout_s
        self._backoff = backoff
        self._on_change = on_change
        self.runtimes: dict[RuntimeKey, RuntimeRecord] = {
            key: RuntimeRecord(key, fallback_selector(key)) for key in self._static
        }
        self.ok = False
        """False until the first read, and while reading the Deployments fails."""
        self._missing: set[RuntimeKey] = set()  # configured runtimes whose Deployment was not found

    async def run(self, first_attempt: asyncio.Event) -> None:
        """Re-read Deployments every `resync_interval_s`; sooner, with backoff, after a failure.

        `first_attempt` is set once the first read has succeeded or failed."""
        failures = 0
        while True:
            try:
                await self._refresh()
            except Exception as error:
                if not isinstance(error, KubeApiError):
                    log.exception("Kubernetes discovery: unexpected error reading runtime Deployments")
                failures += 1
                if self.ok or failures == 1:
                    log.warning("Kubernetes discovery: cannot read runtime Deployments: %s", error)
                self.ok = False
                delay = min(self._backoff(failures), self._resync_interval_s)
            else:
                if not self.ok and failures:
                    log.info("Kubernetes discovery: runtime Deployments readable again")
                self.ok = True
                failures = 0
                delay = self._resync_interval_s
            first_attempt.set()
            await asyncio.sleep(delay)

    async def _refresh(self) -> None:
        """Read every runtime's Deployment; replace the runtime table only when every read worked."""
        apps = AppsV1Api(self._client())
        fresh: dict[RuntimeKey, RuntimeRecord] = {}
        reads = [self._read_deployment(apps, key) for key in self._static]
        for outcome in await asyncio.gather(*reads, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
            fresh[outcome.key] = outcome
        if self._discover:
            for namespace in self._namespaces if self._namespaces is not None else (None,):
                for runtime in await self._list_deployments(apps, namespace):
                    fresh.setdefault(runtime.key, runtime)
        if runtime_table(fresh) != runtime_table(self.runtimes):
            added = sorted(str(key) for key in fresh.keys() - self.runtimes.keys())
            removed = sorted(str(key) for key in self.runtimes.keys() - fresh.keys())
            if added or removed:
                log.info("Kubernetes discovery: %d runtimes added (%s), %d removed (%s)", len(added), few(added),
                         len(removed), few(removed))
            self.runtimes = fresh
            self._on_change()

    async def _read_deployment(self, apps: AppsV1Api, key: RuntimeKey) -> RuntimeRecord:
        what = f"read Deployment {key}"
        call = partial(
            apps.read_namespaced_deployment_without_preload_content,
            key.deployment,
            key.namespace,
            _request_timeout=self._request_timeout_s,
        )
        try:
            document = await read_json(call, what)
        except KubeApiError as error:
            if error.status != 404:
                raise
            if key not in self._missing:
                self._missing.add(key)
                hint = ("" if key.deployment.startswith(SERVINGRUNTIME_DEPLOYMENT_PREFIX) else
                        f"; ModelMesh names a runtime's Deployment {SERVINGRUNTIME_DEPLOYMENT_PREFIX}<ServingRuntime>: "
                        f"for the ServingRuntime {key.deployment}, write "
                        f"deployment: {SERVINGRUNTIME_DEPLOYMENT_PREFIX}{key.deployment}")
                log.warning("Kubernetes discovery: configured runtime %s has no Deployment (yet)%s", key, hint)
            return RuntimeRecord(key, fallback_selector(key))
        self._missing.discard(key)
        return parse_deployment(document, key)

    async def _list_deployments(self, apps: AppsV1Api, namespace: Scope) -> list[RuntimeRecord]:
        options: dict[str, Any] = {
            "label_selector": self._label_selector,
            "_request_timeout": self._request_timeout_s,
        }
        if namespace is None:
            call = partial(apps.list_deployment_for_all_namespaces_without_preload_content, **options)
        else:
            call = partial(apps.list_namespaced_deployment_without_preload_content, namespace, **options)
        document = await read_json(call, f"list Deployments in {scope_name(namespace)}")
        runtimes = []
        for item in document.get("items") or []:
            key = deployment_key(item)
            if key is not None:
                runtimes.append(parse_deployment(item, key))
        return runtimes
