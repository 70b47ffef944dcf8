"""Caches on the request path hold a whole large fleet: a cycle of HPA requests never misses them."""

from __future__ import annotations

import tracemalloc

from autoscaler.api.identity import cached_get_attributes, request_attributes
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
    cached_get_attributes.cache_clear()
    paths = [f"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns{i}/{metric}"
             for i in range(RUNTIMES) for metric in METRICS]
    for _ in range(2):
        for path in paths:
            request_attributes("GET", path)
    assert cached_get_attributes.cache_info().hits == len(paths)


def test_unique_long_paths_do_not_pile_up_in_the_attribute_cache() -> None:
    """Any authenticated client can send unique paths of up to 8 KB (the review comes after the attributes):
    kept, 65,536 of them would hold over 500 MiB, past the shipped memory limit."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2_000):
            request_attributes("GET", f"/apis/x/{i}/" + "a" * 8_000)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000  # bytes; 34 MB when kept
