"""One round of Prometheus's answers against discovery's pods (for `PrometheusSource`): which pods it has
(`seen_pods`), and when having none of them is an outage of the source: no series at all for the inventory's pods
while Ready pods exist, unless Prometheus has series for them from other pods' exporters or from exporters that say
they cannot read ModelMesh (those pods say so); the error says what to look at, the labels Prometheus names the pods
with or whether it scrapes the exporters at all. And whether the round shows what Prometheus's lookback-delta or
the exporters' scrape interval would cause, on which pod the check then reads (`pod_to_check`).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Final

from autoscaler.model import PodSample, RuntimeKey
from autoscaler.sources.base import RuntimeInventory
from autoscaler.sources.prometheus_answers import REASON_EMPTY, PrometheusSourceError
from autoscaler.sources.prometheus_promql import FRESHNESS, PodRef
from autoscaler.sources.prometheus_reader import PrometheusReader
from exporter import names

KIND_UNLABELLED: Final = "empty, series without the labels"
"""The `PrometheusSourceError.kind` of an empty answer whose series lack the namespace or pod label."""


def seen_pods(answers: Mapping[str, Mapping[PodRef, str]], inventory: Mapping[RuntimeKey, RuntimeInventory],
              reader: PrometheusReader, *, namespace_label: str, pod_label: str) -> set[PodRef]:
    """Inventory pods with a freshness series, less those whose exporter names another pod
    (`prometheus_other_pod`); none at all while Ready pods exist is an outage (not where Prometheus has series
    for them, from other pods' exporters or from exporters that say they cannot read ModelMesh: those pods say
    so)."""
    freshness, other = answers[FRESHNESS], reader.other_pods
    pods = [(key.namespace, pod) for key, runtime in inventory.items() for pod in runtime.pods]
    seen = {(ns, pod.name) for ns, pod in pods if (ns, pod.name) in freshness and (ns, pod.name) not in other}
    failing = reader.failing or {}  # pods whose exporters say why they have no series
    if seen or any((ns, pod.name) in other or (ns, pod.name) in failing for ns, pod in pods):
        return seen
    if any(pod.ready for _, pod in pods) and reader.unlabelled:
        raise PrometheusSourceError(
            REASON_EMPTY,
            f"no {names.LAST_SUCCESS_TIMESTAMP} or {names.REQUESTS_PER_SECOND} series for any of {len(pods)} "
            f"known pods: Prometheus has them, but without a {namespace_label} or {pod_label} label (its "
            "relabelling names them otherwise: kubernetes_namespace and kubernetes_pod_name with the classic "
            "kubernetes_sd_configs one); give the names with --prometheus-namespace-label and "
            "--prometheus-pod-label",
            # A kind of its own: an outage that began empty (the adapter started before the first scrape) says
            # this advice once when it becomes true, where its line said only `0 series with other labels`.
            KIND_UNLABELLED,
        )
    if any(pod.ready for _, pod in pods):
        raise PrometheusSourceError(
            REASON_EMPTY,
            f"no {names.LAST_SUCCESS_TIMESTAMP} or {names.REQUESTS_PER_SECOND} series for any of "
            f"{len(pods)} known pods ({len(freshness)} series with other {namespace_label}/"
            f"{pod_label} labels): is Prometheus scraping the exporters, with those labels? (Other label "
            "names: --prometheus-namespace-label, --prometheus-pod-label; with prometheus-operator, does the "
            "Prometheus object select the PodMonitor? kube-prometheus-stack selects only those labelled "
            "release: <its Helm release>; are its targets up, or does a NetworkPolicy keep it from port 9187?)",
        )
    return seen


def pod_to_check(inventory: Mapping[RuntimeKey, RuntimeInventory], seen: set[PodRef], last: Mapping[PodRef, PodSample],
                 other_pods: Container[PodRef], *, partial: bool, max_staleness_s: float, now: float) -> PodRef | None:
    """The pod `prometheus_lookback` reads where a round that reached Prometheus shows what its settings would
    cause: no series at all (an empty answer), none for a Ready pod it had them for before (unless the answer said
    it was partial, `partial`, which says why), or a pod whose sample is already stale; a pod the round answered
    for, else a Ready one. None: a healthy round asks nothing more. `last`: each pod's last good sample;
    `other_pods`: the pods whose series come from another pod's exporter."""
    ready = [(key.namespace, pod.name) for key, runtime in inventory.items() for pod in runtime.pods if pod.ready]
    sampled = (last[ref].sampled_at for ref in seen if ref in last)
    stale = any(now - at > max_staleness_s for at in sampled if at is not None)
    lost = not partial and any(ref not in seen and ref in last and ref not in other_pods for ref in ready)
    if seen and not stale and not lost:
        return None
    return min(seen) if seen else min(ready, default=None)
