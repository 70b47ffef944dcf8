"""Self-metrics when serving and refreshing run in different processes.

Each process keeps its own `AdapterMetrics`; a serving worker answers `/metrics` with the series it owns
(requests, latency, freshness, authentication, authorization, Kubernetes review calls) followed by the
refresh process's own series (refresh duration, source errors, served values, deletion costs, leadership),
which arrive pre-rendered with every snapshot. Each family comes from exactly one side, so the page never
repeats one.

With several workers, Prometheus scrapes whichever worker the kernel hands its connection, so each page must
count every worker's requests, or the counters would jump between scrapes and `rate()` would read resets.
The workers then keep their series in prometheus_client's multiprocess mode (`MULTIPROCESS_DIRECTORY`, set
by the refresh process for the workers it starts, `autoscaler.workers`): values in files one per process in
a directory of the pod, summed on every page by `MultiProcessCollector`. One worker keeps its own registry. The
variable inherited from the environment is dropped at start (`autoscaler.cli`): it would have summed whatever
files lay in that directory, earlier runs' included.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, ProcessCollector, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from autoscaler.api.snapshot import SnapshotStore
from autoscaler.api.status import ApiResponse
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.values_age import ValuesAge

MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's switch to multiprocess values: read when it is imported, so it must be in a worker's
environment from its start."""

SERVING_ATTRIBUTES = ("requests", "scaled_to_zero_answers", "request_seconds", "freshness", "authentications",
                      "authorizations", "kube_api_seconds")
"""The `AdapterMetrics` series a serving worker owns; every other one belongs to the refresh process."""


def _family_names(metrics: AdapterMetrics, attributes: Iterable[str]) -> frozenset[str]:
    return frozenset(getattr(metrics, attribute)._name for attribute in attributes)


class FamilyFilter:
    """A collector's families, only those named (or only those not named): enough for `generate_latest`."""

    def __init__(self, source: Collector, names: frozenset[str], keep: bool) -> None:
        self._source = source
        self._names = names
        self._keep = keep

    def collect(self) -> Iterator[Metric]:
        for family in self._source.collect():
            if (family.name in self._names) == self._keep:
                yield family


def serving_families(metrics: AdapterMetrics) -> FamilyFilter:
    """The serving series: this process's own, or, in multiprocess mode, every worker's summed."""
    names = _family_names(metrics, SERVING_ATTRIBUTES)
    directory = os.environ.get(MULTIPROCESS_DIRECTORY)
    if directory:
        return FamilyFilter(MultiProcessCollector(None, path=directory), names, keep=True)  # type: ignore[no-untyped-call]
    return FamilyFilter(metrics.registry, names, keep=True)


class Collectors:
    """Some collectors, in the order given: enough for `generate_latest`."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self._collectors = tuple(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


def refresh_families(metrics: AdapterMetrics) -> Collectors:
    """The refresh process's own metrics but the per-runtime, per-pod and per-RuntimeScale ones, which render
    themselves (`runtime_exposition`): picked by attribute, since collecting the whole registry to filter it
    would build those families (50,000 series at 5,000 runtimes) only to drop them."""
    skipped = {id(getattr(metrics, attribute)) for attribute in SERVING_ATTRIBUTES}
    skipped |= {id(gauge) for gauge in metrics.runtime_gauges}
    return Collectors(value for value in vars(metrics).values()
                      if isinstance(value, MetricWrapperBase) and id(value) not in skipped)


def render_refresh_metrics(metrics: AdapterMetrics) -> bytes:
    """The refresh process's part of `/metrics`, sent with each snapshot: the per-runtime families (tens of
    thousands of series at fleet size) from their kept text, the few others through `generate_latest`."""
    return generate_latest(refresh_families(metrics)) + metrics.runtime_exposition()


def worker_metrics_handler(metrics: AdapterMetrics, snapshots: SnapshotStore,
                           stall_limit_s: float | None = None) -> Handler:
    """The worker's page: its serving series, the `process_*` of the refresh process (its parent: the pod's
    main process, PID 1 in the container, whose start time is the container's), read live from /proc so that
    they move while the refresh hangs, the age of the values it serves and the age past which they count as stalled
    (`autoscaler.values_age`), then the refresh's series as last sent."""
    refresh_pid = os.getppid()
    own = Collectors((serving_families(metrics), ProcessCollector(pid=lambda: refresh_pid, registry=None),
                      ValuesAge(lambda: snapshots.updated_at, stall_limit_s)))

    async def handler(request: web.Request) -> web.Response:
        body = generate_latest(own) + snapshots.current.refresh_metrics
        response = ApiResponse(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
        # Compressed for a scraper that asks (Prometheus does), as prometheus_client's own handlers do: 4-5.5 MB
        # of text at 5,000 runtimes. aiohttp compresses a body this size in its executor, off the event loop.
        response.enable_compression()
        return response

    return handler
