"""`/openapi/v2` is valid Swagger 2.0 and describes exactly the paths the app routes."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from autoscaler.api.app import CATCH_ALL_NAME, SLASH_TOLERANT, build_api_app
from autoscaler.api.openapi import document, document_bytes
from autoscaler.names import ServedMetric
from tests.api.builders import KEY, refresher_with, runtime_view
from tests.support.nested import values_at


def test_the_document_is_valid_swagger_2() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    validator.validate(document(), cls=validator.OpenAPIV2SpecValidator)
    broken = copy.deepcopy(document())
    del broken["paths"]["/apis"]["get"]["responses"]["200"]["description"]
    with pytest.raises(OpenAPIValidationError):  # the validator is not a no-op
        validator.validate(broken, cls=validator.OpenAPIV2SpecValidator)


def test_structure_without_a_validator() -> None:
    spec = json.loads(document_bytes())
    assert spec["swagger"] == "2.0"
    assert {"title", "version"} <= set(spec["info"])
    for target in values_at(spec, "$ref"):
        assert target.startswith("#/definitions/") and target.removeprefix("#/definitions/") in spec["definitions"]
    operation_ids = [op["operationId"] for item in spec["paths"].values() for method, op in item.items()
                     if method != "parameters"]
    assert len(operation_ids) == len(set(operation_ids))
    for path, item in spec["paths"].items():
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert declared == set(re.findall(r"{(\w+)}", path)), path
        for code, response in item["get"]["responses"].items():
            if code != "200":
                assert response["schema"] == {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}


def test_every_route_is_documented_and_nothing_else() -> None:
    refresher = refresher_with()
    app = build_api_app(refresher, refresher.metrics)
    routed = {resource.canonical for resource in app.router.resources() if resource.name != CATCH_ALL_NAME}
    twins = {path + "/" for path in SLASH_TOLERANT}  # the same routes, asked for with a trailing slash
    assert twins <= routed
    assert routed - twins == set(document()["paths"])


def test_the_metric_parameter_names_every_served_metric() -> None:
    [item] = [v for k, v in document()["paths"].items() if k.endswith("{metric}")]
    metric = next(p for p in item["parameters"] if p["name"] == "metric")
    assert all(m.value in metric["description"] for m in ServedMetric)
    assert item["get"]["x-kubernetes-action"] == "list"


def test_the_paths_documented_open_are_the_ones_served_open_by_default() -> None:
    """A client generated from the document sends credentials exactly where the default gate asks for them."""
    from autoscaler.settings import ServeSettings

    spec = document()
    documented_open = {path for path, item in spec["paths"].items() if item["get"].get("security") == []}
    assert documented_open == set(ServeSettings().authorization_always_allow_paths)
    assert "401" in spec["paths"]["/metrics"]["get"]["responses"]


async def test_the_served_kind_has_one_definition_found_by_its_group_version_kind(
        aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]]) -> None:
    """kubectl explain (and client generators) find a kind's schema by the definition's
    `x-kubernetes-group-version-kind`, as kube-apiserver's builder writes it on every registered kind; no
    definition carried one, so `ExternalMetricValueList` could not be looked up. The meta kinds are left to
    kube-apiserver's own definitions (`openapi._kind`)."""
    refresher = refresher_with(runtime_view(KEY))
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    metric = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
              f"?labelSelector=deployment%3D{KEY.deployment}")
    async with client.get(URL(metric, encoded=True)) as response:
        served = await response.json()
    group, _, version = served["apiVersion"].rpartition("/")
    wanted = {"group": group, "version": version, "kind": served["kind"]}
    marked = {name: schema["x-kubernetes-group-version-kind"] for name, schema in document()["definitions"].items()
              if "x-kubernetes-group-version-kind" in schema}
    assert marked == {"io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList": [wanted]}
    assert set(served) <= set(document()["definitions"][next(iter(marked))]["properties"])
