"""The reads the adapter makes (lists, watches, a Deployment by name) as plain GETs on `kubernetes.aio`'s
`ApiClient`, without the library's generated API classes.

The adapter reads every answer as raw JSON (`autoscaler.kube.raw`), so of `CoreV1Api`, `AppsV1Api`,
`AutoscalingV2Api` and `CustomObjectsApi` it used only the `*_without_preload_content` methods, which build a
path and a query and call `ApiClient.call_api`. Importing those four modules loads the pydantic models of
every object their 800 methods name (V1Pod, V1Deployment, their specs...): 34 MiB of the refresh process's
memory, measured by RSS, for classes it never instantiated. The GETs here make the same request (the path,
the query parameters in the generated order with the same spelling, `Accept: application/json`, the
`BearerToken` auth setting, the request timeout) through the same `ApiClient`, so configuration, token
refresh, client certificates and TLS are the library's as before.

An `Endpoint` (`autoscaler.kube.raw.Endpoint`) takes the list options by the generated methods' names
(`label_selector`, `field_selector`, `resource_version`, `allow_watch_bookmarks`, `watch`, `timeout_seconds`,
`_request_timeout`); any other raises `TypeError`, as the generated methods' argument check did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import aiohttp
from kubernetes.aio.client import ApiClient

from autoscaler.kube.raw import Endpoint, Scope

_QUERY: Final = (
    ("allow_watch_bookmarks", "allowWatchBookmarks"),
    ("field_selector", "fieldSelector"),
    ("label_selector", "labelSelector"),
    ("resource_version", "resourceVersion"),
    ("timeout_seconds", "timeoutSeconds"),
    ("watch", "watch"),
)
"""The list options the adapter gives, each with its query parameter, in the generated methods' order."""
_OPTIONS: Final = frozenset(name for name, _ in _QUERY) | {"_request_timeout"}


@dataclass(frozen=True, slots=True)
class Collection:
    """Where a built-in resource is listed: in all namespaces (`everywhere`) and in one (`namespaced`, with
    `{namespace}`)."""

    everywhere: str
    namespaced: str


PODS: Final = Collection("/api/v1/pods", "/api/v1/namespaces/{namespace}/pods")
DEPLOYMENTS: Final = Collection("/apis/apps/v1/deployments", "/apis/apps/v1/namespaces/{namespace}/deployments")
HPAS: Final = Collection("/apis/autoscaling/v2/horizontalpodautoscalers",
                         "/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers")
DEPLOYMENT: Final = "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
CUSTOM_RESOURCES: Final = Collection("/apis/{group}/{version}/{plural}",
                                     "/apis/{group}/{version}/namespaces/{namespace}/{plural}")
"""Where a custom resource type is listed, with `{group}`, `{version}` and `{plural}` to fill as well."""


def collection_endpoint(api: ApiClient, collection: Collection, scope: Scope) -> Endpoint:
    """The list (and, with `watch=True`, watch) of `collection` in `scope` (None: all namespaces)."""
    if scope is None:
        return partial(get, api, collection.everywhere, {})
    return partial(get, api, collection.namespaced, {"namespace": scope})


def custom_endpoint(api: ApiClient, group: str, version: str, plural: str, scope: Scope) -> Endpoint:
    """The list (and watch) of a namespaced custom resource in `scope` (None: all namespaces)."""
    params = {"group": group, "version": version, "plural": plural}
    if scope is None:
        return partial(get, api, CUSTOM_RESOURCES.everywhere, params)
    return partial(get, api, CUSTOM_RESOURCES.namespaced, {**params, "namespace": scope})


def deployment_endpoint(api: ApiClient, namespace: str, name: str) -> Endpoint:
    """The read of one Deployment by name (only `_request_timeout` applies)."""
    return partial(get, api, DEPLOYMENT, {"namespace": namespace, "name": name})


async def get(api: ApiClient, path: str, path_params: Mapping[str, str], **options: Any) -> aiohttp.ClientResponse:
    """GET `path` (its `{...}` filled from `path_params`) with the list `options`; the response unread, as
    the generated `*_without_preload_content` methods return it (the caller reads and releases it)."""
    unknown = options.keys() - _OPTIONS
    if unknown:
        raise TypeError(f"unexpected options for GET {path}: {', '.join(sorted(unknown))}")
    query = [(wire, options[name]) for name, wire in _QUERY if options.get(name) is not None]
    method, url, headers, body, post_params = await api.param_serialize(
        method="GET", resource_path=path, path_params=dict(path_params), query_params=query,
        header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
    )
    response = await api.call_api(method, url, headers, body, post_params,
                                  _request_timeout=options.get("_request_timeout"))
    return response.response  # type: ignore[no-any-return]
