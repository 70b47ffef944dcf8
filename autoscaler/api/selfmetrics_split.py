"""Self-metrics when serving and refreshing run in different processes.

Each process keeps its own `AdapterMetrics`; a serving worker answers `/metrics` with the series it owns
(requests, latency, freshness, authentication, authorization, Kubernetes review calls) followed by the
refresh process's own series (refresh duration, source errors, served values, deletion costs, leadership),
which arrive pre-rendered with every snapshot. Each family comes from exactly one side, so the page never
repeats one. With several workers, request counters are per worker: Prometheus sees the worker its scrape
reached (sum over the pod's workers is not possible from one scrape; the refresh side's series are whole).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric

from autoscaler.api.snapshot import SnapshotStore
from autoscaler.selfmetrics import AdapterMetrics

SERVING_ATTRIBUTES = ("requests", "request_seconds", "freshness", "authentications", "authorizations",
                      "kube_api_seconds")
"""The `AdapterMetrics` series a serving worker owns; every other one belongs to the refresh process."""


def _family_names(metrics: AdapterMetrics, attributes: Iterable[str]) -> frozenset[str]:
    return frozenset(getattr(metrics, attribute)._name for attribute in attributes)


class FamilyFilter:
    """A registry's families, only those named (or only those not named): enough for `generate_latest`."""

    def __init__(self, metrics: AdapterMetrics, names: frozenset[str], keep: bool) -> None:
        self._registry = metrics.registry
        self._names = names
        self._keep = keep

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            if (family.name in self._names) == self._keep:
                yield family


def serving_families(metrics: AdapterMetrics) -> FamilyFilter:
    return FamilyFilter(metrics, _family_names(metrics, SERVING_ATTRIBUTES), keep=True)


def refresh_families(metrics: AdapterMetrics) -> FamilyFilter:
    return FamilyFilter(metrics, _family_names(metrics, SERVING_ATTRIBUTES), keep=False)


def render_refresh_metrics(metrics: AdapterMetrics) -> bytes:
    """The refresh process's part of `/metrics`, sent with each snapshot."""
    return generate_latest(refresh_families(metrics))


def worker_metrics_handler(metrics: AdapterMetrics, snapshots: SnapshotStore) -> Handler:
    own = serving_families(metrics)

    async def handler(request: web.Request) -> web.Response:
        body = generate_latest(own) + snapshots.current.refresh_metrics
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return handler
