"""Who is asking, and what they ask for: the two inputs of every authorization decision.

`request_attributes` reads a request the way kube-apiserver's `RequestInfoFactory` does
(`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`), so a SubjectAccessReview from this adapter carries
the same resource attributes kube-apiserver checked in front of it: reading an external metric,
`GET /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC`, is verb **list** on resource METRIC (the path
names no object), as prometheus-adapter's LIST route; checked as `get`, a user granted only `list` was let through
by kube-apiserver and refused here (`cannot get resource`). Discovery (`/apis/GROUP/VERSION` and shorter),
`/openapi/...` and `/metrics` are non-resource `get`. Paths outside `/api` and `/apis` are
non-resource requests (verb = lower-cased HTTP method), except this adapter's two runtime endpoints, which
are resources of its group so that they can be granted per namespace with a Role (a path with an empty
segment is always a non-resource request):

- `/keda/v1/namespaces/NS/runtimes/DEPLOYMENT` is `get` on `runtimes` named DEPLOYMENT in NS;
- `/debug/runtimes/NS/DEPLOYMENT` is `get` on `runtimes/debug` (subresource `debug`), so the values can be
  granted to KEDA without the per-pod internals.
"""

from __future__ import annotations

import functools
from typing import NamedTuple
from urllib.parse import unquote

from autoscaler.names import API_GROUP, API_VERSION

RUNTIMES_RESOURCE = "runtimes"
DEBUG_SUBRESOURCE = "debug"

# kube-apiserver's mapping of HTTP methods to resource verbs (`GET` depends on whether a name is given).
_RESOURCE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


class UserInfo(NamedTuple):
    """An authenticated user, as `k8s.io/apiserver/pkg/authentication/user.Info`.

    Named tuples (not dataclasses) for the identity and the attributes: together they are the authorization
    cache key of every request, and tuples build, hash and compare in C."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted (key, values) pairs

    def extra_dict(self) -> dict[str, list[str]]:
        return {key: list(values) for key, values in self.extra}


class ResourceAttributes(NamedTuple):
    verb: str
    group: str
    version: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


class NonResourceAttributes(NamedTuple):
    verb: str
    path: str


Attributes = ResourceAttributes | NonResourceAttributes


def _resource_verb(method: str, name: str) -> str:
    if method in ("GET", "HEAD"):
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return _RESOURCE_VERBS.get(method, method.lower())


def _api_attributes(method: str, parts: list[str]) -> Attributes | None:
    """`/apis/GROUP/VERSION/...` or `/api/VERSION/...` as kube parses them; None when not a resource path."""
    if parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    elif parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    verb = _resource_verb(method, name)
    if group == API_GROUP:
        resource = resource.lower()  # served metric names match case-insensitively (docs/design.md)
    return ResourceAttributes(verb, group, version, resource, namespace, name, subresource)


CACHED_PATH_LENGTH = 512
"""Longest path whose attributes are cached. Every path this API serves is shorter (a namespace is at most
63 characters, a Deployment name 253: KEDA's longest path is under 350), while a client that sends unique
paths of aiohttp's 8 KB limit (any authenticated identity will do: the review comes after) would otherwise
make the cache hold over 500 MiB, past the shipped memory limit. Longer paths are parsed on every request."""


def request_attributes(method: str, raw_path: str) -> Attributes:
    """The authorization attributes of a request, from its path as sent (percent-encoded, no query).

    Segments are split before they are decoded, as aiohttp's router does, so an encoded `/` (`%2F`) stays
    inside its segment and the attributes name exactly what the handler will serve. Cached for paths up to
    `CACHED_PATH_LENGTH`: a pure function of its arguments, and HPAs ask for the same few paths over and over."""
    if len(raw_path) > CACHED_PATH_LENGTH:
        return _parsed_attributes(method, raw_path)
    if method == "GET":
        return cached_get_attributes(raw_path)
    return cached_request_attributes(method, raw_path)


def _parsed_attributes(method: str, raw_path: str) -> Attributes:
    method = method.upper()
    trimmed = raw_path.strip("/")
    parts = [unquote(part) for part in trimmed.split("/")] if trimmed else []
    if parts and "" not in parts:
        attributes = _api_attributes(method, parts)
        if attributes is not None:
            return attributes
        if len(parts) == 6 and parts[:3] == ["keda", "v1", "namespaces"] and parts[4] == RUNTIMES_RESOURCE:
            return ResourceAttributes(_resource_verb(method, parts[5]), API_GROUP, API_VERSION,
                                      RUNTIMES_RESOURCE, parts[3], parts[5])
        if len(parts) == 4 and parts[:2] == ["debug", RUNTIMES_RESOURCE]:
            return ResourceAttributes(_resource_verb(method, parts[3]), API_GROUP, API_VERSION,
                                      RUNTIMES_RESOURCE, parts[2], parts[3], DEBUG_SUBRESOURCE)
    return NonResourceAttributes(method.lower(), unquote(raw_path))


cached_request_attributes = functools.lru_cache(maxsize=65_536)(_parsed_attributes)
"""`request_attributes` of the paths it caches, for methods other than GET (refused by the router after the
gate, but authorized first, as kube does); about 65 MiB when full of the longest paths it takes."""


@functools.lru_cache(maxsize=65_536)
def cached_get_attributes(raw_path: str) -> Attributes:
    """`request_attributes("GET", raw_path)` for the paths it caches: every namespace x metric path of a large
    fleet, and every runtime's KEDA path. Its own cache, keyed by the path alone: `lru_cache` uses a single
    `str` argument as its key as it is (its hash kept in the string), where two arguments make a tuple to build
    and hash on every request."""
    return _parsed_attributes("GET", raw_path)


def describe(attributes: Attributes) -> str:
    """The object of kube's forbidden message: `list resource "m" in API group "g" in the namespace "ns"`."""
    if isinstance(attributes, NonResourceAttributes):
        return f'{attributes.verb} path "{attributes.path}"'
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    text = f'{attributes.verb} resource "{resource}" in API group "{attributes.group}"'
    return text + (f' in the namespace "{attributes.namespace}"' if attributes.namespace else "")
