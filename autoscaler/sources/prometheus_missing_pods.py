"""Ready pods Prometheus has no series for while it has them for other pods of their runtime, as `PrometheusSource`
says them: named in the log once they turn stale, an `unseen` problem of the pod in /debug meanwhile, and a line
when they have series again.

The scrape source names a pod whose scrape fails, with its URL and why; with Prometheus a pod missing from the
answers only made the runtime's line say `1 of 10 ready pods stale; holding values`, and /debug said nothing of
the pod. The usual causes are Prometheus's: the pod's target down or not discovered yet, its series relabelled or
dropped. A new pod is not scraped for a scrape interval or two, so the log waits until the pod is as old as
`max_staleness_s` (the default policy's: the pod then counts as stale), as its runtime's line does. That age runs
from when Prometheus answered again where it answered nothing meanwhile (an outage, a restart on an empty TSDB):
a restarted Prometheus scrapes one pod before another, and the other's last sample, from before the outage, made
the first answer name it, then the next say it had series again. A runtime none
of whose Ready pods has series is `prometheus_unseen`'s, and a pod whose series are another pod's is
`prometheus_other_pod`'s; neither is said again here. Nor is a pod whose exporter Prometheus scrapes but which says
it never read ModelMesh (no series of load, none of its success time): the cause is known, and
`prometheus_modelmesh_failing` says it; the source counts such pods among those Prometheus has (`seen`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from autoscaler.log_lists import count_of, few
from autoscaler.model import PodSample, RuntimeKey
from autoscaler.sources.base import RuntimeInventory, SourceProblem
from autoscaler.sources.prometheus_promql import PodRef
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN
from exporter import names

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name


def _sampled_at(sample: PodSample | None, since: float) -> float:
    """When the pod was last read: its last good sample's time, else when it went missing (never read)."""
    return since if sample is None or sample.sampled_at is None else sample.sampled_at


def _named(refs: Collection[PodRef]) -> str:
    return few([f"{namespace}/{pod}" for namespace, pod in sorted(refs)])


class MissingPods:
    """The Ready pods missing from Prometheus's answers while others of their runtime are in them, since when
    (`note`), for the log and /debug (`problems`); Prometheus at `url` is named in what they say, and a pod is said
    in the log once it is `max_staleness_s` old."""

    def __init__(self, url: str, max_staleness_s: float) -> None:
        self._url = url
        self._max_staleness_s = max_staleness_s
        self._since: dict[PodRef, float] = {}  # missing pods, since the first answer without them
        self._said: set[PodRef] = set()  # those the log named
        self._pods: dict[RuntimeKey, list[str]] = {}  # the missing pods by runtime, for /debug
        self._answering_since: float | None = None  # the first of the good rounds since Prometheus last had none

    def unanswered(self) -> None:
        """A round with no series (Prometheus failing, or an empty answer held): a pod's age for the log runs again
        from the next good round, not from its sample from before."""
        self._answering_since = None

    def note(self, inventory: Mapping[RuntimeKey, RuntimeInventory], seen: Collection[PodRef],
             left_out: Collection[PodRef], last: Mapping[PodRef, PodSample], now: float) -> None:
        """One good round's answers: `seen`, the inventory's pods they have series for; `left_out`, those whose
        series are said otherwise (another pod's); `last`, each pod's last good sample."""
        missing: dict[PodRef, float] = {}
        self._pods = {}
        answering_since = self._answering_since = now if self._answering_since is None else self._answering_since
        for key, runtime in inventory.items():
            ready = [(key.namespace, pod.name) for pod in runtime.pods if pod.ready]
            if not any(ref in seen for ref in ready):
                continue  # the whole runtime: `prometheus_unseen` says it
            for ref in ready:
                if ref not in seen and ref not in left_out:
                    missing[ref] = self._since.get(ref, now)
                    self._pods.setdefault(key, []).append(ref[1])
        back = [ref for ref in self._said if ref in seen]
        if back:
            log.info("Prometheus at %s has series again for %s", self._url, _named(back))
        self._said.intersection_update(missing)  # a pod gone from discovery, or its whole runtime unseen: no line
        stale = [ref for ref, since in missing.items() if ref not in self._said
                 and now - max(_sampled_at(last.get(ref), since), answering_since) >= self._max_staleness_s]
        if stale:
            log.warning(
                "Prometheus at %s has no %s series for %s (Ready, listed by discovery) while it has them for other "
                "pods of their runtimes: is it scraping them (their targets down, not discovered, or their series "
                "relabelled or dropped)? Their last good samples are held until they have series again",
                self._url, names.LAST_SUCCESS_TIMESTAMP, f"{count_of(len(stale), 'pod')}: {_named(stale)}")
            self._said.update(stale)
        self._since = missing

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """The runtime's missing pods for /debug, each since the first answer without it."""
        return tuple(
            SourceProblem(
                REASON_UNSEEN, f"Prometheus at {self._url} has no {names.LAST_SUCCESS_TIMESTAMP} series for the pod "
                "while it has them for other pods of the runtime: its target down or not discovered yet, or its "
                "series relabelled or dropped; it holds its last good sample until it turns stale",
                self._since[(key.namespace, pod)], pod)
            for pod in self._pods.get(key, ()))

    def forget(self, key: RuntimeKey) -> None:
        """Drop what is kept of runtime `key`'s pods (gone, or created again)."""
        for pod in self._pods.pop(key, ()):
            self._since.pop((key.namespace, pod), None)
            self._said.discard((key.namespace, pod))
