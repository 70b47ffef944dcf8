"""The Kubernetes API calls the adapter makes to act on the cluster: patch a pod's annotations; read, create
and replace a `coordination.k8s.io/v1` Lease; and, for the replica bridge (docs/design.md), read ServingRuntimes,
their Deployments and RuntimeScales, merge-patch `ServingRuntime.spec.replicas` and a RuntimeScale's `status`.

Everything goes through `kubernetes.aio` (its configuration loading, authentication, token refresh and TLS), on
the adapter's own event loop: no threads, and a slow API server only ever delays the task that asked. Requests
are built with the generic `ApiClient.param_serialize` / `call_api` and carry the JSON we wrote, because the
generated Lease model serializes MicroTime with `datetime.isoformat()`, which writes `+00:00` and drops the
fraction when the microseconds are 0; the API server parses MicroTime with Go's fixed six-digit layout.

Errors: every failure leaves this module as a `KubeApiError` with the HTTP status (None when no answer came:
connection refused, timeout, TLS), the server's message and any `Retry-After`, the library's exception chained.
A configuration that cannot be loaded is a `KubeConfigError`. Library exceptions never leak past here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import aiohttp
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import OpenApiException
from kubernetes.aio.config.config_exception import ConfigException

from autoscaler.kube.config import load_kube_settings
from autoscaler.kube.errors import KubeApiError, KubeConfigError
from autoscaler.kube.exec_plugin import end_renewal
from autoscaler.kube.paths import CUSTOM_RESOURCES, DEPLOYMENT, DEPLOYMENTS, collection_endpoint, custom_endpoint
from autoscaler.kube.raw import CACHED, Endpoint, read_json, retry_wait, scope_name
from autoscaler.kube.where import in_cluster

__all__ = ["JSON", "CustomResource", "KubeApiError", "KubeClient", "KubeConfigError", "in_cluster"]

JSON = dict[str, Any]

MERGE_PATCH: Final = "application/merge-patch+json"
_POD: Final = "/api/v1/namespaces/{namespace}/pods/{name}"
_LEASES: Final = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
_LEASE: Final = _LEASES + "/{name}"


@dataclass(frozen=True, slots=True)
class CustomResource:
    """Where a custom resource type is served: `/apis/{group}/{version}/[namespaces/{ns}/]{plural}`."""

    group: str
    version: str
    plural: str


class KubeClient:
    """A handful of typed calls over one `kubernetes.aio` API client; `close()` when done."""

    def __init__(self, api: client.ApiClient, *, default_namespace: str = "default", timeout_s: float = 5.0) -> None:
        self._api = api
        self.default_namespace = default_namespace
        """The namespace this process runs in (in a cluster) or its kubeconfig context's: where a Lease goes."""
        self._timeout_s = timeout_s

    @classmethod
    async def connect(cls, kubeconfig: Path | None, *, user_agent: str, timeout_s: float = 5.0) -> KubeClient:
        """From `kubeconfig` when given; else the in-cluster service account; else the default kubeconfig
        (`$KUBECONFIG` or `~/.kube/config`). Raises `KubeConfigError` when none of them works."""
        settings = await load_kube_settings(kubeconfig)
        api = client.ApiClient(settings.configuration)
        api.user_agent = user_agent
        return cls(api, default_namespace=settings.namespace, timeout_s=timeout_s)

    @property
    def request_timeout_s(self) -> float:
        """How long one call may take (seconds); a watch stream is allowed this on top of its own timeout."""
        return self._timeout_s

    async def close(self) -> None:
        await end_renewal(self._api.configuration)  # an exec plugin run under way, and its processes
        await self._api.close()  # type: ignore[no-untyped-call]

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        """Merge-patch annotations onto a pod (RFC 7386: keys not named are left alone)."""
        body = {"metadata": {"annotations": dict(annotations)}}
        await self._request("PATCH", _POD, {"namespace": namespace, "name": name}, body, MERGE_PATCH)

    async def get_lease(self, namespace: str, name: str) -> JSON | None:
        """The Lease as the server has it, or None when it does not exist."""
        return await self._get_or_none(_LEASE, {"namespace": namespace, "name": name})

    async def create_lease(self, namespace: str, lease: JSON) -> JSON:
        """POST a new Lease; 409 AlreadyExists when another replica was faster."""
        return await self._request("POST", _LEASES, {"namespace": namespace}, lease)

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON:
        """PUT a Lease; its `metadata.resourceVersion` makes it conditional (409 Conflict when stale)."""
        return await self._request("PUT", _LEASE, {"namespace": namespace, "name": name}, lease)

    async def get_deployment(self, namespace: str, name: str) -> JSON | None:
        """An `apps/v1` Deployment, or None when it does not exist."""
        return await self._get_or_none(DEPLOYMENT, {"namespace": namespace, "name": name})

    async def get_custom(self, resource: CustomResource, namespace: str | None, name: str) -> JSON | None:
        """One custom object (cluster-scoped when `namespace` is None), or None when it does not exist."""
        path, params = _custom_path(resource, namespace)
        return await self._get_or_none(path + "/{name}", {**params, "name": name})

    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON:
        """Every object of a namespaced custom resource in `namespace` (None: all namespaces), as the raw list."""
        call = partial(self.custom_endpoint(resource, namespace), _request_timeout=self._timeout_s)
        return await read_json(call, f"list {resource.plural}.{resource.group} in {scope_name(namespace)}")

    async def list_deployments(self, namespace: str | None, label_selector: str) -> JSON:
        """The `apps/v1` Deployments in `namespace` (None: all namespaces) that `label_selector` selects, from the
        API server's watch cache (`resourceVersion=0`, as informers list): whole pod templates, listed at every
        resync, which Kubernetes before 1.31 otherwise reads from etcd each time. They may lag the latest write
        by the cache's delay (milliseconds), which a status read from them takes up at the next resync."""
        call = partial(collection_endpoint(self._api, DEPLOYMENTS, namespace), label_selector=label_selector,
                       resource_version=CACHED, _request_timeout=self._timeout_s)
        return await read_json(call, f"list deployments in {scope_name(namespace)}")

    def custom_endpoint(self, resource: CustomResource, namespace: str | None) -> Endpoint:
        """The raw list method of a namespaced custom resource in `namespace` (None: all namespaces): it lists,
        or watches with `watch=True` (`autoscaler.kube.list_watch.ListWatch` follows it)."""
        return custom_endpoint(self._api, resource.group, resource.version, resource.plural, namespace)

    async def merge_patch_custom(
        self, resource: CustomResource, namespace: str, name: str, patch: JSON, *, subresource: str | None = None
    ) -> JSON:
        """RFC 7386 merge patch of a namespaced custom object, or of its `status`/`scale` subresource."""
        path, params = _custom_path(resource, namespace)
        path += "/{name}" + (f"/{subresource}" if subresource else "")
        return await self._request("PATCH", path, {**params, "name": name}, patch, MERGE_PATCH)

    async def _get_or_none(self, path: str, params: Mapping[str, str]) -> JSON | None:
        try:
            return await self._request("GET", path, params)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    async def _request(
        self,
        method: str,
        path: str,
        path_params: Mapping[str, str],
        body: JSON | None = None,
        content_type: str = "application/json",
    ) -> JSON:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            serialized = await self._api.param_serialize(
                method=method, resource_path=path, path_params=dict(path_params), header_params=headers,
                body=body, auth_settings=["BearerToken"],
            )
            response = await self._api.call_api(*serialized, _request_timeout=self._timeout_s)
            raw = await response.read()  # type: ignore[no-untyped-call]
            status = int(response.status)
            retry_after = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError, OSError, OpenApiException, ConfigException) as error:
            raise KubeApiError(f"{method} {path.format(**path_params)}: no answer: {error!r}") from error
        document = _parse(raw)
        if status >= 400:
            message = document.get("message") if isinstance(document.get("message"), str) else raw[:200].decode(
                "utf-8", "replace")
            reason = str(document.get("reason") or "")
            raise KubeApiError(f"{method} {path.format(**path_params)}: {status} {message}", status, reason,
                               retry_wait(document, retry_after))
        return document


def _custom_path(resource: CustomResource, namespace: str | None) -> tuple[str, dict[str, str]]:
    params = {"group": resource.group, "version": resource.version, "plural": resource.plural}
    if namespace is None:
        return CUSTOM_RESOURCES.everywhere, params
    return CUSTOM_RESOURCES.namespaced, {**params, "namespace": namespace}


def _parse(raw: bytes) -> JSON:
    try:
        document = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}

