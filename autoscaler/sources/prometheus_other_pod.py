"""Pods whose series in Prometheus come from another pod's exporter, as `PrometheusSource` finds and says them.

Prometheus names a target's series by its service discovery (`pod`, `namespace` from the pod role's meta
labels), not by what answered at the target's address. An IP is given to another pod once its pod is gone, and
Prometheus's discovery can lag (a lost node's pod still listed; a relabelling that names pods wrongly): its target
for pod rt-5 then reaches rt-0's exporter, and rt-0's load was read as rt-5's (a hot pod counted twice, the
desired replicas up by its load, and the hot pod's deletion cost lowered as its load moved to the other name).
Only the exporter knows which pod it runs in, and says so (`modelmesh_exporter_pod_info`,
`exporter.pod_identity`); with the shipped scrape config (`honor_labels` false) Prometheus keeps its words as
`exported_pod` and `exported_namespace` beside its own `pod` and `namespace`, and where Prometheus's labels are
named otherwise (`kubernetes_pod_name`) they stay `pod` and `namespace`. A series whose exporter names another
pod is left out as missing data for the pod it is labelled with (values held, never lowered), as the scrape
source refuses such an answer (`answered_pod`, reason `other_pod`; /debug names the pod the exporter says only where
it is of the runtime's namespace). A `pod_info` that names no pod (an exporter from before the series, a sidecar
without the downward API's variables, or `honor_labels` true, where the exporter's labels replaced Prometheus's) is
read as always.

No query of its own: the freshness query carries the mismatched pods as extra series (`with_other_pods`), each
with the exporter's labels, by which `prometheus_reader` sets them apart from the freshness values (`answered`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Final

from autoscaler.log_lists import NAMED, few
from autoscaler.model import RuntimeKey
from autoscaler.sources.answered_pod import REASON_OTHER_POD, claimed_pod
from autoscaler.sources.base import RuntimeInventory, SourceProblem, ongoing_problem
from autoscaler.sources.prometheus_matchers import SeriesMatchers
from exporter import names
from exporter.pod_identity import PodIdentity

PodRef = tuple[str, str]  # (namespace, pod), as `prometheus_promql` (which writes the query with this module's PromQL)

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

_EXPORTER_LABELS: Final = ("namespace", "pod")
"""The exporter's own labels on `POD_INFO` (`names.POD_LABELS` but the uid, which Prometheus has no label of)."""


WAS_LABEL: Final = "was"
"""The label that keeps a series' own namespace and pod while `other_pod_series` sets them to the exporter's words."""


def _said_labels(namespace_label: str, pod_label: str) -> dict[str, tuple[str, ...]]:
    """Per exporter label, the labels that hold its value in Prometheus, the one that wins first: `exported_<label>`
    where Prometheus's own label took the name (`honor_labels` false), and the label itself where Prometheus's
    label is named otherwise (the classic relabelling's `kubernetes_pod_name`)."""
    return {own: (f"exported_{own}", *((own,) if target != own else ()))
            for own, target in zip(_EXPORTER_LABELS, (namespace_label, pod_label), strict=True)}


def other_pod_series(matchers: SeriesMatchers, *, namespace_label: str, pod_label: str) -> str:
    """Per pod (`namespace_label`, `pod_label`) whose `POD_INFO` names another pod, one series with the labels that
    say which (`answered`).

    A series names another pod when setting Prometheus's labels to the exporter's words changes it: `unless`
    with every label matched keeps exactly those, since only the two labels set may differ (a series whose
    exporter names no pod, or its own, is unchanged by them, so matches itself). The labels set would make two
    series one where Prometheus's targets for both pods are one address (an IP given again: `instance` the
    same), which Prometheus refuses (`vector cannot contain metrics with the same labelset`, every query of the
    refresh failed): each keeps its own pod in WAS_LABEL, which the match ignores."""
    info = matchers.exporter_series(names.POD_INFO)
    said = f'label_join({info}, "{WAS_LABEL}", "/", "{namespace_label}", "{pod_label}")'
    for (_own, sources), target in zip(_said_labels(namespace_label, pod_label).items(), (namespace_label, pod_label),
                                       strict=True):
        for source in reversed(sources):  # the first wins: set last
            said = f'label_replace({said}, "{target}", "$1", "{source}", "(.+)")'
    by = [namespace_label, pod_label, *(label for sources in _said_labels(namespace_label, pod_label).values()
                                        for label in sources)]
    return f"max by ({', '.join(by)}) ({info} unless ignoring ({WAS_LABEL}) {said})"


def with_other_pods(freshness: str, other_pods: str) -> str:
    """The freshness query with the other pods' series beside its own (theirs have more labels: `or` keeps both)."""
    return f"{freshness} or {other_pods}"


def answered(labels: Mapping[str, str], namespace_label: str, pod_label: str) -> PodIdentity | None:
    """The pod an extra series of the freshness answer names (`other_pod_series`); None for a freshness series,
    which has none of the exporter's labels."""
    said = {own: next((labels[label] for label in sources if labels.get(label)), None)
            for own, sources in _said_labels(namespace_label, pod_label).items()}
    if not any(said.values()):
        return None
    return PodIdentity(said["namespace"], said["pod"])


def said_of(url: str, ref: PodRef, claimed: PodIdentity, *, told: bool = False) -> str:
    """What the log (`told` false) and the pod's runtime's /debug (`told`: the pod the exporter names said only
    where it is of the runtime's namespace, `claimed_pod`) say of a pod whose series come from another pod's
    exporter."""
    return (f"Prometheus at {url} has series for pod {ref[0]}/{ref[1]} from an exporter that says it runs in "
            f"{claimed_pod(claimed, ref[0] if told else None)} ({names.POD_INFO}): Prometheus's target for the pod "
            "reaches another pod's exporter (the pod's IP given to another pod while its service discovery lags, or a "
            "relabelling that names pods wrongly); not counted, the pod holds its last good sample until it turns "
            "stale")


class OtherPods:
    """The pods whose series come from another pod's exporter, since when: counted every refresh (`count`, as the
    scrape source counts each refused answer), logged when it starts and when it ends (a line each, or one line
    naming a few of them: `log_lists`), and an `other_pod` problem of the pod in /debug meanwhile."""

    def __init__(self, url: str, count: Callable[[str], None]) -> None:
        self._url = url
        self._count = count
        self._now: dict[PodRef, PodIdentity] = {}  # the pods whose series name another pod, and that pod
        self._problems: dict[RuntimeKey, dict[str, SourceProblem]] = {}

    def __contains__(self, ref: object) -> bool:
        return ref in self._now

    def note(self, inventory: Mapping[RuntimeKey, RuntimeInventory], found: Mapping[PodRef, PodIdentity],
             now: float) -> None:
        """This refresh's pods whose series name another pod (`found`, those of the inventory's pods kept)."""
        known = {(key.namespace, pod.name) for key, runtime in inventory.items() for pod in runtime.pods}
        current = {ref: claimed for ref, claimed in found.items() if ref in known}
        for _ in current:
            self._count(REASON_OTHER_POD)
        started = [ref for ref, claimed in current.items() if self._now.get(ref) != claimed]
        ended = sorted(ref for ref in self._now if ref not in current and ref in known)
        if len(started) <= NAMED:
            for ref in started:
                log.warning("%s", said_of(self._url, ref, current[ref]))
        else:
            log.warning("Prometheus at %s has series for %d pods from exporters that say they run in other pods "
                        "(%s): Prometheus's targets for them reach other pods' exporters; not counted, they hold "
                        "their last good samples (/debug says which pod each exporter names)", self._url,
                        len(started), few([f"{ns}/{pod}" for ns, pod in sorted(started)]))
        if ended:
            log.info("Prometheus at %s has series from the pods' own exporters again for %s", self._url,
                     few([f"{ns}/{pod}" for ns, pod in ended]))
        self._now = current
        problems: dict[RuntimeKey, dict[str, SourceProblem]] = {}
        for key, runtime in inventory.items():
            before = self._problems.get(key, {})
            for pod in runtime.pods:
                claimed = current.get((key.namespace, pod.name))
                if claimed is not None:
                    detail = said_of(self._url, (key.namespace, pod.name), claimed, told=True)
                    problems.setdefault(key, {})[pod.name] = ongoing_problem(
                        before.get(pod.name), REASON_OTHER_POD, detail, now, pod.name)
        self._problems = problems

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """The runtime's pods whose series come from another pod's exporter, for /debug."""
        return tuple(self._problems.get(key, {}).values())

    def forget(self, known: Collection[PodRef]) -> None:
        """Drop the pods discovery no longer lists."""
        self._now = {ref: claimed for ref, claimed in self._now.items() if ref in known}
