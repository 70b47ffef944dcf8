"""Discovery documents: `/version`, `/api`, `/apis` and per-group-version APIResourceLists.

`kubectl` and the Python clients ask these before anything else; every document is derived from
`resources.RESOURCE_TYPES`, so a type added there is discoverable with no change here.
"""

from __future__ import annotations

import re

from tests.fakes.kube.resources import RESOURCE_TYPES, ResourceType
from tests.fakes.kube.wire import JSON


def discovery_document(path: str, *, git_version: str, server_address: str) -> JSON | None:
    """The discovery document served at `path` (no trailing slash), or None when `path` is not one."""
    if path == "/version":
        match = re.match(r"v(\d+)\.(\d+)", git_version)
        major, minor = (match.group(1), match.group(2)) if match else ("1", "31")
        return {
            "major": major,
            "minor": minor,
            "gitVersion": git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2024-08-13T07:28:49Z",
            "goVersion": "go1.22.5",
            "compiler": "gc",
            "platform": "linux/amd64",
        }
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }
    groups = sorted({t.group for t in RESOURCE_TYPES if t.group})
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g) for g in groups]}
    if path.startswith("/apis/") and path.count("/") == 2 and path.split("/")[2] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(path.split("/")[2])}
    for group_version in {t.api_version for t in RESOURCE_TYPES}:
        prefix = "/api/" if "/" not in group_version else "/apis/"
        if path == prefix + group_version:
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": [_api_resource(t) for t in RESOURCE_TYPES if t.api_version == group_version],
            }
    return None


def _api_group(group: str) -> JSON:
    version = next(t.version for t in RESOURCE_TYPES if t.group == group)
    entry = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [entry], "preferredVersion": entry}


def _api_resource(rtype: ResourceType) -> JSON:
    resource: JSON = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        resource["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        resource["categories"] = list(rtype.categories)
    return resource
