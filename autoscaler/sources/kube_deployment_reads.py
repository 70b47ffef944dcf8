"""How pod discovery reads runtime Deployments from the Kubernetes API (`DeploymentReads`, for
`DeploymentResync`): a configured runtime's Deployment by name (one not found is the runtime with its fallback
selector, and a WARNING once, with the name ModelMesh gives a runtime's Deployment), the runtimes among a
namespace's Deployments by the discovery label selector, a discovered runtime's Deployment by name (None once it is
deleted), and one the table does not hold, looked for as discovery would list it: the API server, not this module,
decides whether that Deployment is a runtime.

Logs go to pod discovery's logger (`autoscaler.sources.kube_pods`), the one operators filter on.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from kubernetes.aio.client import ApiClient

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.paths import DEPLOYMENTS, collection_endpoint, deployment_endpoint
from autoscaler.kube.raw import Scope, read_json, scope_name
from autoscaler.model import RuntimeKey
from autoscaler.names import SERVINGRUNTIME_DEPLOYMENT_PREFIX
from autoscaler.sources.kube_objects import RuntimeRecord, deployment_key, fallback_selector, parse_deployment

log = logging.getLogger("autoscaler.sources.kube_pods")


class DeploymentReads:
    """Reads runtime Deployments, each read bounded by `request_timeout_s`; discovery lists those labelled
    `label_selector`."""

    def __init__(self, *, label_selector: str, request_timeout_s: float) -> None:
        self._label_selector = label_selector
        self._request_timeout_s = request_timeout_s
        self._missing: set[RuntimeKey] = set()  # configured runtimes whose Deployment was not found

    async def read_deployment(self, api: ApiClient, key: RuntimeKey) -> RuntimeRecord:
        what = f"read Deployment {key}"
        call = partial(deployment_endpoint(api, key.namespace, key.deployment),
                       _request_timeout=self._request_timeout_s)
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

    async def list_deployments(self, api: ApiClient, namespace: Scope, name: str | None = None) -> list[RuntimeRecord]:
        """The runtimes among the Deployments of `namespace` (None: all), by the discovery label selector; with
        `name`, only that one (a field selector), for `DeploymentResync.discover_soon`."""
        options: dict[str, Any] = {
            "label_selector": self._label_selector,
            "_request_timeout": self._request_timeout_s,
        }
        if name is not None:
            options["field_selector"] = f"metadata.name={name}"
        call = partial(collection_endpoint(api, DEPLOYMENTS, namespace), **options)
        document = await read_json(call, f"list Deployments in {scope_name(namespace)}")
        runtimes = []
        for item in document.get("items") or []:
            key = deployment_key(item)
            if key is not None:
                runtimes.append(parse_deployment(item, key))
        return runtimes

    async def read_discovered(self, api: ApiClient, key: RuntimeKey) -> RuntimeRecord | None:
        """A discovered runtime's Deployment by name; None when it is gone (removed at once: left to the resync,
        it stayed a runtime with replicas and no pods, 503 "no ready pods" with a WARNING, for up to 30 s, and its
        memory was kept for a Deployment created again under its name)."""
        call = partial(deployment_endpoint(api, key.namespace, key.deployment),
                       _request_timeout=self._request_timeout_s)
        try:
            document = await read_json(call, f"read Deployment {key}")
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        return parse_deployment(document, key)

    async def find_discovered(self, api: ApiClient, key: RuntimeKey) -> RuntimeRecord | None:
        """Deployment `key` if discovery would list it (its labels match the selector), else None."""
        listed = await self.list_deployments(api, key.namespace, name=key.deployment)
        return next((runtime for runtime in listed if runtime.key == key), None)
