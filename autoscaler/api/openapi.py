"""`/openapi/v2`: a Swagger 2.0 description of every path the adapter serves.

kube-apiserver's aggregator downloads it and merges it into the cluster's `/openapi/v2`, so Kubernetes
types keep their canonical definition names (`io.k8s.apimachinery.pkg.apis.meta.v1.Status`,
`io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList`) and operations carry
`x-kubernetes-action`, as generated specs do. The document is built once and served as bytes.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aiohttp import web

from autoscaler import __version__
from autoscaler.api.health import CHECK_DESCRIPTIONS, CHECKS
from autoscaler.names import API_GROUP, GROUP_VERSION, ServedMetric

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
METRICS = "io.k8s.metrics.pkg.apis.external_metrics.v1beta1."
OURS = "io.modelmesh.autoscaler.v1."


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def _string(description: str = "") -> dict[str, str]:
    return {"type": "string", "description": description} if description else {"type": "string"}


def _object(description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _kind(schema: dict[str, Any], kind: str, group: str, version: str) -> dict[str, Any]:
    """`schema` as the definition of a kind: `x-kubernetes-group-version-kind`, a list of one, as kube-apiserver's
    builder marks every registered kind. kubectl explain (`kubectl explain modelmesh_desired_replicas`) finds a
    kind's schema by it, not by the definition's name. Only the API's own kind is marked: the meta kinds
    (`Status`, `APIGroup`, ...) are kube-apiserver's, which marks its full definitions of them; the aggregator
    keeps this document's shorter ones under another name where they differ, and a mark on those would offer a
    second schema for the same kind."""
    return {**schema, "x-kubernetes-group-version-kind": [{"group": group, "kind": kind, "version": version}]}


def _definitions() -> dict[str, Any]:
    strings = {"type": "array", "items": {"type": "string"}}
    group_version = _object("A group version for discovery.", {
        "groupVersion": _string(), "version": _string()}, ["groupVersion", "version"])
    return {
        META + "Status": _object("An error: every non-2xx answer of this server.", {
            "kind": _string(), "apiVersion": _string(), "metadata": {"type": "object"},
            "status": _string("Failure"), "message": _string(), "reason": _string(),
            "code": {"type": "integer", "format": "int32"}}),
        META + "GroupVersionForDiscovery": group_version,
        META + "APIGroup": _object("An API group.", {
            "kind": _string(), "apiVersion": _string(), "name": _string(),
            "versions": {"type": "array", "items": _ref(META + "GroupVersionForDiscovery")},
            "preferredVersion": _ref(META + "GroupVersionForDiscovery")}, ["name", "versions"]),
        META + "APIGroupList": _object("The API groups served here.", {
            "kind": _string(), "apiVersion": _string(),
            "groups": {"type": "array", "items": _ref(META + "APIGroup")}}, ["groups"]),
        META + "APIResource": _object("One served metric.", {
            "name": _string(), "singularName": _string(), "namespaced": {"type": "boolean"},
            "kind": _string(), "verbs": strings}, ["name", "singularName", "namespaced", "kind", "verbs"]),
        META + "APIResourceList": _object("The metrics served in external.metrics.k8s.io/v1beta1.", {
            "kind": _string(), "apiVersion": _string(), "groupVersion": _string(),
            "resources": {"type": "array", "items": _ref(META + "APIResource")}}, ["groupVersion", "resources"]),
        "io.k8s.apimachinery.pkg.version.Info": _object("Version of this server.", {
            key: _string() for key in ("major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate",
                                       "goVersion", "compiler", "platform")}),
        METRICS + "ExternalMetricValue": _object("One served value of a runtime.", {
            "metricName": _string(), "metricLabels": {"type": "object", "additionalProperties": _string()},
            "timestamp": _string("time of the oldest sample behind the value (RFC 3339)"),
            "window": {"type": "integer", "format": "int64", "description": "aggregation window, seconds"},
            "value": _string("a quantity in milli-units, e.g. 1500m")},
            ["metricName", "metricLabels", "timestamp", "value"]),
        METRICS + "ExternalMetricValueList": _kind(_object("The answer to an HPA's external metric request.", {
            "kind": _string(), "apiVersion": _string(), "metadata": {"type": "object"},
            "items": {"type": "array", "items": _ref(METRICS + "ExternalMetricValue")}}, ["items"]),
            "ExternalMetricValueList", API_GROUP, "v1beta1"),
        OURS + "RuntimeValues": _object(
            "A runtime's values for KEDA's metrics-api scaler (valueLocation: the metric name); null when "
            "one value is unknown.",
            {**{m.value: {"type": "number", "x-nullable": True} for m in ServedMetric},
             "namespace": _string(), "deployment": _string(),
             "labels": {"type": "object", "additionalProperties": _string()},
             "timestamp": _string("time of the oldest sample behind the values (RFC 3339)"),
             "window": {"type": "integer"}}, ["namespace", "deployment"]),
        OURS + "RuntimeExplanation": {
            "type": "object", "additionalProperties": True,
            "description": "Every field of the adapter's decision for a runtime: pods, weights, proposals, winner."},
    }


_NOT_SERVED = ("Values not served (the HPA holds): unknown right now, or not served while a setting stays as it is; "
               "the message says which, why, and what to change")
"""A 503's description: a lasting cause (`autoscaler.api.unserved`) is no moment's gap."""


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
            500: "Authorization could not be checked", 503: _NOT_SERVED}
    return {str(code): {"description": text[code], "schema": _ref(META + "Status")} for code in codes}


def _get(operation_id: str, description: str, schema: dict[str, Any], *errors: int, **extra: Any) -> dict[str, Any]:
    return {"get": {"operationId": operation_id, "description": description, "produces": ["application/json"],
                    "responses": {"200": {"description": "OK", "schema": schema}, **_errors(401, 403, *errors)},
                    **extra}}


def _open(operation_id: str, description: str, produces: str = "text/plain", *errors: int) -> dict[str, Any]:
    """A path served without authentication (the default `--authorization-always-allow-paths`)."""
    return {"get": {"operationId": operation_id, "description": description, "produces": [produces],
                    "security": [], "responses": {"200": {"description": "OK", "schema": {"type": "string"}},
                                                  **_errors(*errors)}}}


def _text(operation_id: str, description: str, produces: str, *errors: int) -> dict[str, Any]:
    """A text path behind the gate: the document's security, and its 401 and 403."""
    return {"get": {"operationId": operation_id, "description": description, "produces": [produces],
                    "responses": {"200": {"description": "OK", "schema": {"type": "string"}},
                                  **_errors(401, 403, *errors)}}}


def _health_checks() -> dict[str, Any]:
    """Each health check's own path (`health`): behind the gate, as kube-apiserver's are (its default open
    paths are the three health paths exactly)."""
    return {f"{path}/{name}": _text(f"check{path[1:].capitalize()}{name.capitalize()}",
                                    f"The {path} check {name!r} alone: {CHECK_DESCRIPTIONS[name]}", "text/plain",
                                    *((503,) if name != "ping" else ()))
            for path, names in CHECKS.items() for name in names}


_LISTING = ("?verbose lists each check ([+]NAME ok) as kube-apiserver does; ?exclude=NAME leaves one out; each "
            "check is also served at PATH/NAME.")


def _path_parameter(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "type": "string", "description": description}


def document() -> dict[str, Any]:
    namespace = _path_parameter("namespace", "namespace of the runtime Deployment")
    deployment = _path_parameter("deployment", "name of the runtime Deployment")
    metric = _path_parameter("metric", "one of " + ", ".join(m.value for m in ServedMetric) + " (any case)")
    selector = {"name": "labelSelector", "in": "query", "required": True, "type": "string",
                "description": "names the runtime: deployment=<Deployment name> or servingruntime=<name>"}
    gvk = {"group": API_GROUP, "version": "v1beta1", "kind": "ExternalMetricValueList"}
    return {
        "swagger": "2.0",
        "info": {"title": "modelmesh-autoscaler", "version": __version__,
                 "description": "Skew-aware external metrics for KServe ModelMesh runtimes."},
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "schemes": ["https"],
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header",
                                                "description": "Bearer token, checked with a TokenReview"}},
        "security": [{"BearerToken": []}],
        "paths": {
            "/apis": _get("getAPIGroups", "API groups served here.", _ref(META + "APIGroupList")),
            f"/apis/{API_GROUP}": _get("getExternalMetricsAPIGroup", "The external metrics API group.",
                                       _ref(META + "APIGroup")),
            f"/apis/{GROUP_VERSION}": _get("getExternalMetricsAPIResources", "The served metrics.",
                                           _ref(META + "APIResourceList")),
            f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{{metric}}": {
                **_get("listNamespacedExternalMetricValue", "The metric's value for the runtime the selector names.",
                       _ref(METRICS + "ExternalMetricValueList"), 400, 404, 500, 503,
                       **{"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk}),
                "parameters": [namespace, metric, selector],
            },
            "/version": _get("getCodeVersion", "Version of this server.", _ref("io.k8s.apimachinery.pkg.version.Info")),
            "/openapi/v2": _get("getOpenAPIDocument", "This document.", {"type": "object"}),
            "/keda/v1/namespaces/{namespace}/runtimes/{deployment}": {
                **_get("readRuntimeValues", "All values of a runtime as flat JSON for KEDA's metrics-api scaler.",
                       _ref(OURS + "RuntimeValues"), 404, 500, 503),
                "parameters": [namespace, deployment],
            },
            "/debug/runtimes/{namespace}/{deployment}": {
                **_get("readRuntimeExplanation", "Why the adapter serves what it serves for a runtime.",
                       _ref(OURS + "RuntimeExplanation"), 404, 500, 503),
                "parameters": [namespace, deployment],
            },
            "/healthz": _open("checkHealth", "Liveness: ok while the process serves and its values are "
                              f"refreshed (503 once the refresh has stalled). {_LISTING}", "text/plain", 503),
            "/livez": _open("checkLiveness", "Liveness: ok while the process serves and its values are "
                            f"refreshed (503 once the refresh has stalled). {_LISTING}", "text/plain", 503),
            "/readyz": _open("checkReadiness", "Readiness: ok once the first refresh completed, while its values "
                             f"are refreshed. {_LISTING}", "text/plain", 503),
            **_health_checks(),
            "/metrics": _text("getSelfMetrics", "The adapter's own Prometheus metrics: `get` on the non-resource "
                              "URL /metrics, unless --authorization-always-allow-paths opens it.",
                              "text/plain; version=0.0.4"),
        },
        "definitions": _definitions(),
    }


@functools.cache
def document_bytes() -> bytes:
    return json.dumps(document(), separators=(",", ":")).encode()


async def openapi_v2(request: web.Request) -> web.Response:
    return web.Response(body=document_bytes(), content_type="application/json")
