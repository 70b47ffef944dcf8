"""The static documents of the API: discovery and version.

Shapes follow `k8s.io/apimachinery/pkg/apis/meta/v1` (APIGroupList, APIGroup, APIResourceList) and
`k8s.io/apimachinery/pkg/version.Info`, which is what kubectl and the aggregator parse.
"""

from __future__ import annotations

import platform
from typing import Any

from autoscaler import __version__
from autoscaler.names import API_GROUP, API_VERSION, GROUP_VERSION, ServedMetric
from exporter import build_info


def _group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": API_VERSION}
    return {"name": API_GROUP, "versions": [version], "preferredVersion": version}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]}


def api_group() -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group()}


def api_resource_list() -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            {
                "name": metric.value,
                "singularName": "",
                "namespaced": True,
                "kind": "ExternalMetricValueList",
                "verbs": ["get"],
            }
            for metric in ServedMetric
        ],
    }


def version_info() -> dict[str, str]:
    """version.Info, every field a string: `gitCommit` is the revision `--version` and the build_info gauge name
    (empty where it is unknown, as Kubernetes leaves it), so `kubectl get --raw /version` tells builds apart."""
    revision = build_info.revision()
    major, minor, *_ = [*__version__.split("."), "0", "0"]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{__version__}",
        "gitCommit": "" if revision == build_info.UNKNOWN else revision,
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "cpython",
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }
