"""Renders the refresh's `RuntimeView`s into a `ServingSnapshot` (`autoscaler.api.snapshot`): every answer
the API can give about a runtime, as bytes, made once per refresh instead of once per request.

Rendering happens where the refresh runs: in the refresh process when serving runs in worker processes
(`autoscaler.workers`), else in the one process, lazily when a request first finds the refresher's views
replaced (`RefresherSnapshots`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from autoscaler.api import packed, runtimes
from autoscaler.api.debug_document import SourceState, debug_record
from autoscaler.api.handlers import metric_answers
from autoscaler.api.selfmetrics_split import render_refresh_metrics
from autoscaler.api.snapshot import EMPTY, METRICS, RenderedRuntimes, RuntimeAnswers, ServingSnapshot
from autoscaler.model import PodUrls, RuntimeKey, RuntimeView
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy_origins import PolicyExplained
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.source_problems import ProblemSource, source_problems


class DebugSource(ProblemSource, Protocol):
    """What /debug reads of the refresher's source (every `sources.base.MetricSource` is one, so the API layer
    needs no import of the sources): what fails now in reading each runtime, and each pod's scrape URL."""

    def scrape_urls(self, key: RuntimeKey) -> PodUrls | None: ...


def render_runtime(view: RuntimeView, policy: PolicyExplained | None = None,
                   source: SourceState | None = None, urls: PodUrls | None = None) -> RuntimeAnswers:
    return RuntimeAnswers(
        metric_answers(view, METRICS, source),
        runtimes.keda_answer(view, source),
        debug_record(view, policy, source, urls),
    )


def render_snapshot(views: Mapping[RuntimeKey, RuntimeView], ready: bool,
                    refresh_metrics: bytes = b"", policies: PolicyBook | None = None,
                    source: DebugSource | None = None) -> ServingSnapshot:
    """Every runtime's answers; `policies` (the refresher's) adds each runtime's policy and its origins to /debug,
    and `source` (the refresher's) what fails now in reading each runtime (`sources.base.source_problems`) and,
    where it scrapes the pods itself, each pod's URL (`scrape_urls`)."""
    explain = policies.explain if policies is not None else _unexplained
    urls = _scrape_urls(source)
    return ServingSnapshot(
        ready,
        RenderedRuntimes({(key.namespace, key.deployment): render_runtime(view, explain(key),
                                                                          _source_state(source, key), urls(key))
                          for key, view in views.items()}),
        refresh_metrics,
    )


def _source_state(source: DebugSource | None, key: RuntimeKey) -> SourceState | None:
    return None if source is None else (source.name, source_problems(source, key))


def _unexplained(key: RuntimeKey) -> PolicyExplained | None:
    return None


def _scrape_urls(source: DebugSource | None) -> Callable[[RuntimeKey], PodUrls | None]:
    """The source's `scrape_urls` (`MetricSource.scrape_urls` says what /debug shows of a source without any),
    or no URLs without a source."""
    return _no_urls if source is None else source.scrape_urls


def _no_urls(key: RuntimeKey) -> PodUrls | None:
    return None


class RefresherSnapshots:
    """The one-process mode: renders the refresher's views again whenever it has published new ones.

    The refresher replaces its `views` dict whole on each refresh, so an identity check per request tells
    whether the snapshot is current."""

    def __init__(self, refresher: Refresher) -> None:
        self._refresher = refresher
        self._views: object = None
        self._ready = False
        self._snapshot = EMPTY

    @property
    def current(self) -> ServingSnapshot:
        refresher = self._refresher
        if refresher.views is not self._views or refresher.ready != self._ready:
            self._views, self._ready = refresher.views, refresher.ready
            self._snapshot = render_snapshot(refresher.views, refresher.ready, policies=refresher.policies,
                                             source=refresher.source)
        return self._snapshot

    @property
    def updated_at(self) -> float | None:
        return self._refresher.refreshed_monotonic


class SnapshotPublisher:
    """The refresh process's side of the hand-over: each refresh's views as one packed blob for the workers.
    `source` (the refresher's) puts what fails now in reading each runtime in its /debug."""

    def __init__(self, metrics: AdapterMetrics, policies: PolicyBook | None = None,
                 source: DebugSource | None = None) -> None:
        self._metrics = metrics
        self._policies = policies
        self._source = source

    def render(self, views: Mapping[RuntimeKey, RuntimeView], ready: bool) -> ServingSnapshot:
        return render_snapshot(views, ready, policies=self._policies, source=self._source)

    def refresh_metrics(self) -> bytes:
        return render_refresh_metrics(self._metrics)

    def pack(self, snapshot: ServingSnapshot) -> bytes:
        return packed.pack(snapshot)

    def snapshot_blob(self, views: Mapping[RuntimeKey, RuntimeView], ready: bool) -> bytes:
        snapshot = self.render(views, ready)
        return self.pack(snapshot._replace(refresh_metrics=self.refresh_metrics()))
