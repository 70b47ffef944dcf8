"""Signal series Prometheus stopped having for Ready pods whose other series it still has, as `PrometheusSource`
says them: once a pod has lacked the series for `max_staleness_s`, one line naming the series and its pods and an
`unseen` problem of each pod in /debug, and a line when it is back.

A metric_relabel_configs rule (a PodMonitor's metricRelabelings) that drops `modelmesh_pod_requests_per_second`
leaves every pod fresh, by its success time, and without a request rate: the values that use it are held (they may
rise, never fall) for as long as the rule stays, which is right, but the log said only `requests missing on 2 of 2
ready pods`, /debug's `source.problems` was empty, and nothing named the series or Prometheus. The scrape source
calls a rate missing beside the others garbage; with Prometheus the exporter may be fine and the series lost on the
way, so it is said as Prometheus's, as a pod without series is (`prometheus_missing_pods`).

Only a series Prometheus has had for the pod itself counts: one its exporter never published (a new pod's rates
before its second read, a ModelMesh with no cache capacity, an older exporter) is no series that stopped, and the
values that would use it say so already. `modelmesh_pod_lru_age_seconds` never counts: the exporter drops it
whenever the LRU copy was just used. Both the log and /debug wait `max_staleness_s`, as the log does for a missing
pod: an exporter restarted in its pod publishes its rates again from its second read, seconds later.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Final

from autoscaler.log_lists import count_of, few
from autoscaler.model import RuntimeKey
from autoscaler.sources.base import RuntimeInventory, SourceProblem
from autoscaler.sources.exposition import SCALAR_FIELDS
from autoscaler.sources.prometheus_promql import PodRef
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN
from exporter import names

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

SERIES_OF_FIELD: Final = {field: series for series, field in SCALAR_FIELDS.items()
                          if series != names.LRU_AGE_SECONDS}
"""The signals whose series an exporter that reads ModelMesh always publishes (its rates from its second read), by
the `PodSample` field they are read into."""

LIKELY_CAUSES: Final = ("a metric_relabel_configs rule (a PodMonitor's metricRelabelings, a ServiceMonitor's) or a "
                        "relabelling that drops it, or an exporter version that does not publish it")
"""Why Prometheus would have a pod's other series and not this one."""

Missing = tuple[PodRef, str]
"""A pod and the field of the signal whose series Prometheus does not have for it."""


class DroppedSeries:
    """The Ready pods' signal series Prometheus stopped having while it has their others, since when (`note`), for
    the log and /debug (`problems`); Prometheus at `url` is named in what they say, and a series is said in the log
    once a pod has lacked it for `max_staleness_s`."""

    def __init__(self, url: str, max_staleness_s: float) -> None:
        self._url = url
        self._max_staleness_s = max_staleness_s
        self._had: dict[PodRef, set[str]] = {}  # the fields Prometheus has had series of, by pod
        self._since: dict[Missing, float] = {}  # what is missing now, since the first answer without it
        self._said: set[Missing] = set()  # what the log named
        self._pods: dict[RuntimeKey, dict[str, list[str]]] = {}  # for /debug: by runtime, pod, the series missing

    def note(self, inventory: Mapping[RuntimeKey, RuntimeInventory], answers: Mapping[str, Collection[PodRef]],
             seen: Collection[PodRef], now: float) -> None:
        """One good, complete round: `answers`, the pods each signal's answer has; `seen`, the inventory's pods
        whose success time it has (less those whose series are another pod's)."""
        since: dict[Missing, float] = {}
        self._pods = {}
        for key, runtime in inventory.items():
            for pod in runtime.pods:
                ref = (key.namespace, pod.name)
                if not pod.ready or ref not in seen:
                    continue
                had = self._had.setdefault(ref, set())
                for field in SERIES_OF_FIELD:
                    if ref in answers.get(field, ()):
                        had.add(field)
                    elif field in had:
                        first = since[(ref, field)] = self._since.get((ref, field), now)
                        if now - first >= self._max_staleness_s:
                            self._pods.setdefault(key, {}).setdefault(pod.name, []).append(SERIES_OF_FIELD[field])
        self._say_back([missing for missing in self._said if missing not in since and missing[0] in seen])
        self._said.intersection_update(since)
        self._say_stale([missing for missing, first in since.items()
                         if missing not in self._said and now - first >= self._max_staleness_s])
        self._since = since

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """The runtime's pods that have lacked a signal's series for `max_staleness_s`, for /debug, each since the
        first answer without one."""
        return tuple(
            SourceProblem(
                REASON_UNSEEN, f"Prometheus at {self._url} has no {' or '.join(series)} series for the pod while it "
                f"has its other series, and had it for the pod before: {LIKELY_CAUSES}; the values that use it are "
                "held (they may rise, never fall) until it has it again",
                min(self._since[((key.namespace, pod), field)] for field in self._fields(series)), pod)
            for pod, series in self._pods.get(key, {}).items())

    def forget(self, known: Collection[PodRef]) -> None:
        """Drop what is kept of pods discovery no longer lists (their runtimes' /debug is made again each round)."""
        self._since = {missing: at for missing, at in self._since.items() if missing[0] in known}
        self._said = {missing for missing in self._said if missing[0] in known}
        self._had = {ref: fields for ref, fields in self._had.items() if ref in known}

    def _fields(self, series: Collection[str]) -> list[str]:
        return [field for field, name in SERIES_OF_FIELD.items() if name in series]

    def _say_stale(self, stale: list[Missing]) -> None:
        for field in sorted({field for _, field in stale}):
            pods = sorted(ref for ref, of in stale if of == field)
            log.warning(
                "Prometheus at %s has no %s series for %s (Ready) while it has their other series, and had it "
                "for them before: %s? The values that use it are held (they may rise, never fall) until it has it "
                "again",
                self._url, SERIES_OF_FIELD[field], f"{count_of(len(pods), 'pod')}: {_named(pods)}", LIKELY_CAUSES)
            self._said.update((ref, field) for ref in pods)

    def _say_back(self, back: list[Missing]) -> None:
        for field in sorted({field for _, field in back}):
            pods = sorted(ref for ref, of in back if of == field)
            log.info("Prometheus at %s has %s series again for %s", self._url, SERIES_OF_FIELD[field], _named(pods))


def _named(refs: Collection[PodRef]) -> str:
    return few([f"{namespace}/{pod}" for namespace, pod in sorted(refs)])
