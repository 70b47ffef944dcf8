"""Pods whose exporter cannot read ModelMesh, as `PrometheusSource` finds and says them.

Where ModelMesh breaks after its exporter has read it, the exporter keeps serving that read's values with their
time, and says `modelmesh_exporter_collector_success{collector="modelmesh"} 0` beside them. The values are the
pod's as ever (they turn stale by their time, DESIGN.md §6: missing data never lowers a value); but a pod that only
turned stale said nothing of why, where the scrape source names it a `garbage` problem of the pod. Where the
exporter never read ModelMesh (a wrong --modelmesh-url, a CA that does not sign ModelMesh's certificate) it says
the same `0` with no success time and no load signal: the pod has no series the source reads, and was blamed on
Prometheus's scraping (`prometheus_missing_pods`, or `prometheus_unseen` for a whole runtime, or an `empty` outage
for a whole fleet) while Prometheus scrapes it well. Either is said in the scrape source's words
(`exporter_failures`), counted each refresh as `garbage`, logged when it starts and ends, shown in /debug meanwhile;
a pod never read has no values, and none are made up for it.

One query a refresh for all runtimes (`modelmesh_failing_query`), whose answer holds the failing pods only: a
healthy fleet answers nothing. Its own failure fails nothing but itself: the refresh is good, and what it said last
is neither shown nor said to have ended until it answers again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Final

from autoscaler.log_lists import NAMED, few
from autoscaler.model import PodSample, RuntimeKey
from autoscaler.policies.samples import valid_value
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.base import RuntimeInventory, SourceProblem
from autoscaler.sources.exporter_failures import (
    NEVER_READ,
    cannot_read_modelmesh,
    failed_reads_said,
    modelmesh_fails_after,
)
from autoscaler.sources.prometheus_matchers import EVERY_SERIES, SeriesMatchers
from exporter import names

PodRef = tuple[str, str]  # (namespace, pod), as `prometheus_promql`

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

MODELMESH_FAILING: Final = "modelmesh_failing"
"""The name the query's failures are said and counted by (`prometheus_limits.named`)."""

REASON_LABEL: Final = "reason"
"""The label of the exporter's failed reads' counter that says why."""

FailingAnswer = dict[PodRef, dict[str, str]]
"""The query's answer: (namespace, pod) → reason → failed reads as Prometheus wrote them (none: the exporter says
its collector fails but counts no reads by reason)."""


def modelmesh_failing_query(*, namespace_label: str = "namespace", pod_label: str = "pod",
                            matchers: SeriesMatchers = EVERY_SERIES) -> str:
    """Per pod whose exporter says its ModelMesh collector failed at its last attempt, a marker (value 0, no
    `reason`) and its failed reads per `reason`. A job that says so is enough (`min`), as for the GPU collector's
    failure (`prometheus_promql`); the counters by reason of two jobs are one counter (`max`)."""
    by = f"{namespace_label}, {pod_label}"
    modelmesh = f'collector="{names.COLLECTOR_MODELMESH}"'
    failing = f"(min by ({by}) ({matchers.exporter_series(names.COLLECTOR_SUCCESS, modelmesh)}) == 0)"
    failed_reads = f"max by ({by}, {REASON_LABEL}) ({matchers.exporter_series(names.SCRAPE_ERRORS_TOTAL, modelmesh)})"
    return f"{failing} or ({failed_reads} and on ({by}) {failing})"


def failing_pods(values: Mapping[tuple[str, str, str], str]) -> FailingAnswer:
    """The query's series, keyed (namespace, pod, reason: "" for the marker), by pod: the marker's pods only."""
    failing: FailingAnswer = {(namespace, pod): {} for namespace, pod, reason in values if not reason}
    for (namespace, pod, reason), count in values.items():
        if reason and (namespace, pod) in failing:
            failing[(namespace, pod)][reason] = count
    return failing


class ModelMeshFailing:
    """The Ready pods whose exporter cannot read ModelMesh: counted every refresh (`count`, as the scrape source
    counts each such answer), logged when it starts and when it ends (a line each, or one line naming a few:
    `log_lists`), and a `garbage` problem of the pod in /debug meanwhile. One that never read it (`never_read`) is
    shown at once but counted and logged only once it has been so for `max_staleness_s`: a new pod's exporter may
    not have read its ModelMesh yet when Prometheus last scraped it, and a rollout is no error. One said after a
    good read that turns never read is said again at once: its exporter started again, /debug's words change, and
    nothing else would say why."""

    def __init__(self, url: str, count: Callable[[str], None], max_staleness_s: float) -> None:
        self._url = url
        self._count = count
        self._max_staleness_s = max_staleness_s
        self._since: dict[PodRef, float] = {}  # the failing pods, since the first answer saying so
        self._said: dict[PodRef, bool] = {}  # those whose start the log said: whether as never read
        self._problems: dict[RuntimeKey, dict[str, SourceProblem]] = {}
        self.never_read: frozenset[PodRef] = frozenset()
        """The Ready pods whose exporter says it fails and has no ModelMesh success time, at the last answer: their
        missing series have this cause, not Prometheus's scraping (`prometheus_missing_pods`, `prometheus_unseen`
        leave them out)."""

    def note(self, inventory: Mapping[RuntimeKey, RuntimeInventory], answer: FailingAnswer | None,
             seen: Collection[PodRef], left_out: Collection[PodRef], last: Mapping[PodRef, PodSample],
             now: float) -> None:
        """This refresh's answer (None: the query failed, which leaves the problems unshown, the pods' runs kept);
        `seen`, the pods with a freshness series (a pod without one never read ModelMesh, or not since its exporter
        started); `left_out`, those whose series are another pod's (`prometheus_other_pod` says them); `last`, each
        pod's last good sample, whose time is its last good read."""
        if answer is None:
            self._problems = {}
            return
        found: dict[RuntimeKey, dict[str, SourceProblem]] = {}
        current: dict[PodRef, float] = {}
        never_read: set[PodRef] = set()
        started: list[tuple[PodRef, str]] = []
        restarted: list[tuple[PodRef, str]] = []  # said after a good read, now never read: its exporter started again
        for key, runtime in inventory.items():
            for pod in runtime.pods:
                ref = (key.namespace, pod.name)
                if not pod.ready or ref not in answer or ref in left_out:
                    continue
                held = last.get(ref)
                if ref not in seen:  # no success time: no values served, none held from it
                    never_read.add(ref)
                    detail = cannot_read_modelmesh(NEVER_READ)
                elif held is not None and held.sampled_at is not None:
                    detail = modelmesh_fails_after(held.sampled_at, failed_reads_said(_counts(answer[ref])))
                else:
                    continue  # a garbled freshness series: `prometheus_garbage` says it
                current[ref] = self._since.get(ref, now)
                if ref in self._said and ref in never_read and not self._said[ref]:
                    restarted.append((ref, detail))
                    self._count(REASON_GARBAGE)
                elif ref not in never_read or now - current[ref] >= self._max_staleness_s:
                    self._count(REASON_GARBAGE)
                    if ref not in self._said:
                        started.append((ref, detail))
                found.setdefault(key, {})[pod.name] = SourceProblem(
                    REASON_GARBAGE, f"Prometheus at {self._url}: {detail}", current[ref], pod.name)
        ended = sorted(ref for ref in self._said if ref not in current)
        self._say(started, ended)
        self._say_restarted(restarted)
        self._said = {ref: self._said[ref] for ref in self._said if ref in current}
        self._said.update((ref, ref in never_read) for ref, _ in (*started, *restarted))
        self._since, self._problems, self.never_read = current, found, frozenset(never_read)

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """The runtime's pods whose exporter cannot read ModelMesh, for /debug."""
        return tuple(self._problems.get(key, {}).values())

    def forget(self, known: Collection[PodRef]) -> None:
        """Drop the pods discovery no longer lists."""
        self._since = {ref: since for ref, since in self._since.items() if ref in known}
        self._said = {ref: never for ref, never in self._said.items() if ref in known}

    def _say(self, started: list[tuple[PodRef, str]], ended: list[PodRef]) -> None:
        if len(started) <= NAMED:
            for (namespace, pod), detail in started:
                log.warning("Prometheus at %s says pod %s/%s: %s", self._url, namespace, pod, detail)
        else:
            log.warning("Prometheus at %s says the exporters of %d pods cannot read ModelMesh (%s): those that read "
                        "it before serve their last good reads' values and the pods turn stale, the others publish "
                        "no load signals (/debug says which, and each one's failed reads)", self._url, len(started),
                        few([f"{ns}/{pod}" for (ns, pod), _ in sorted(started)]))
        if ended:
            log.info("Prometheus at %s says the exporters of %s read ModelMesh again (or the pods are no longer "
                     "Ready)", self._url, few([f"{ns}/{pod}" for ns, pod in ended]))

    def _say_restarted(self, restarted: list[tuple[PodRef, str]]) -> None:
        """Pods said after a good read whose exporter started again with ModelMesh still unread: a line each, or one
        naming a few (a sidecar's rollout over a fleet whose ModelMesh fails everywhere)."""
        if len(restarted) <= NAMED:
            for (namespace, name), detail in restarted:
                log.warning("Prometheus at %s says pod %s/%s's exporter started again with ModelMesh still unread "
                            "(the last good read's values are held at their time, stale): %s", self._url, namespace,
                            name, detail)
        elif restarted:
            pods = few([f"{namespace}/{name}" for (namespace, name), _ in sorted(restarted)])
            log.warning("Prometheus at %s says the exporters of %d pods started again with ModelMesh still unread "
                        "(%s): the last good reads' values are held at their time, stale; /debug says each one's "
                        "failure", self._url, len(restarted), pods)


def _counts(raw: Mapping[str, str]) -> list[tuple[str, float]]:
    """The failed reads by reason, in the reasons' order, garbage counts left out (a count is words, not a
    value any policy reads)."""
    counts = ((reason, valid_value(text)) for reason, text in sorted(raw.items()))
    return [(reason, count) for reason, count in counts if count is not None]
