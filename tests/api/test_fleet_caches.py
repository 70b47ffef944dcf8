"""Caches on the request path hold a whole large fleet: a cycle of HPA requests never misses them."""

from __future__ import annotations

from autoscaler.api.identity import request_attributes
from autoscaler.api.selector import deployment_from_selector

RUNTIMES = 5_000
METRICS = ("modelmesh_desired_replicas", "modelmesh_gpu_busy", "modelmesh_request_load", "modelmesh_cache_pressure")


def test_every_selector_of_a_5000_runtime_fleet_is_parsed_once() -> None:
    deployment_from_selector.cache_clear()
    selectors = [f"deployment=modelmesh-serving-rt{i}" for i in range(RUNTIMES)]
    for _ in range(2):  # two HPA sync cycles over the whole fleet
        for selector in selectors:
            deployment_from_selector(selector)
    assert deployment_from_selector.cache_info().hits == RUNTIMES


def test_every_metric_path_of_a_5000_runtime_fleet_is_resolved_once() -> None:
    request_attributes.cache_clear()
    paths = [f"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns{i}/{metric}"
             for i in range(RUNTIMES) for metric in METRICS]
    for _ in range(2):
        for path in paths:
            request_attributes("GET", path)
    assert request_attributes.cache_info().hits == len(paths)
