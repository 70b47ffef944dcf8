"""Why a value is not served for as long as a setting stays as it is: the lasting causes a 503 names.

A 503 that says "unknown right now" sends a platform engineer to wait; a runtime that lacks a signal for good
waits for ever. So a 503 names the lasting cause, and what to change, where the view shows one
(`lasting_cause`); everything else (a pod stale for a while, a signal under coverage, a value held while the
runtime warms up, the metric source down) is a moment's gap, "unknown right now" with the view's reason.

The lasting causes, as the decision and the sources leave them:
- **no GPU signal** (`modelmesh_gpu_busy`): no Ready pod reports a GPU reading, and the runtime has none to wait
  for (`decision`'s `signal_coverage` has no "gpu"): exporters with `--no-gpu`, or a GPU forgotten
  (`policies.gpu_forgetting`) whose collectors now fail.
- **no request-rate signal** (`modelmesh_request_load`): every Ready pod's load data is fresh and none carries a
  request rate, nor did any before. The exporter publishes its rate with the rest of its load data (the scrape
  source reads a pod without one as not fresh at all), so it is a Prometheus that does not keep the series.
- **no cache signal** (`modelmesh_cache_pressure`): fresh load data, and no pod's cache use (its capacity
  unknown): the value is not held for a gap (then it would be in `held`), it cannot be told. The exporter
  publishes the cache use once ModelMesh has published its instance record; with Prometheus, a dropped series.
- **ModelMesh never read** (every value, and KEDA's document): no Ready pod's load data was ever read since the
  adapter found the runtime (`PodView.age_s` None on each), the source answering: the exporters cannot read
  ModelMesh (their GPU readings, where fresh, show they answer), or are not reached; with `--source prometheus`,
  Prometheus has no exporter series of the pods. The message leads with what the adapter knows: its source and,
  where that source says why it reads nothing of the pods (`SourceState`: a scrape refused, timed out, a TLS
  failure, an exporter that cannot read ModelMesh; Prometheus's missing series), the failure in the source's own
  words, the pod's port and what to check included; else what to check for that source alone. A message that named
  every source's checks (the exporter's --modelmesh-url first, then Prometheus's PodMonitors, for a scrape refused
  at a wrong --exporter-port) ran to 900 characters, which `kubectl describe hpa` shows whole. Without a
  `SourceState` (no source given) it names what to check for each source, the scrape source's first.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from autoscaler.api.debug_document import SourceState
from autoscaler.api.unaddressed import without_addresses
from autoscaler.log_lists import few
from autoscaler.model import RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import NOT_SERVED_CAUSES
from autoscaler.policies.signals import FRESH, SIGNAL_CACHE, SIGNAL_GPU, SIGNAL_REQUESTS

NO_GPU_SIGNAL: Final = (
    "the runtime has no GPU signal (no ready pod reports a GPU reading: their exporters run with --no-gpu, or "
    "their GPU collectors fail, as on a node without the NVIDIA driver; a pod that reports one brings it back)")
NO_REQUEST_SIGNAL: Final = (
    "the runtime has no request-rate signal (every ready pod's load data is fresh and none carries a request "
    "rate, modelmesh_pod_requests_per_second: the exporter publishes it with the rest of its load data, so with "
    "--source prometheus Prometheus does not keep that series of the exporters, as where a PodMonitor's "
    "metricRelabelings drop it; a pod that reports one brings it back)")
NO_CACHE_SIGNAL: Final = (
    "the runtime has no cache signal (no ready pod with fresh load data reports its cache use, "
    "modelmesh_pod_cache_used_ratio: the exporter publishes it once ModelMesh has published its instance record, "
    "which ModelMesh does when a model loads or within 6 minutes; with --source prometheus, Prometheus must keep "
    "that series of the exporters, which a PodMonitor's metricRelabelings may drop; a pod that reports its cache "
    "use brings it back)")

_SIGNAL_CAUSES: Final = {
    ServedMetric.GPU_BUSY: (SIGNAL_GPU, NO_GPU_SIGNAL),
    ServedMetric.REQUEST_LOAD: (SIGNAL_REQUESTS, NO_REQUEST_SIGNAL),
    ServedMetric.CACHE_PRESSURE: (SIGNAL_CACHE, NO_CACHE_SIGNAL),
}
"""Each value of one signal: the signal, and why the value is not served while the runtime lacks it."""

_CHECK_MODELMESH: Final = (
    "check the exporter sidecar's --modelmesh-url (EXPORTER_MODELMESH_URL) and, for https, --modelmesh-insecure "
    "or --modelmesh-ca-file (its log says 'modelmesh collector failed (REASON)'; right after a pod starts, this "
    "passes by itself)")

_PROMETHEUS_UNSEEN: Final = (
    "with --source prometheus, Prometheus keeps no exporter series of these pods (a PodMonitor or scrape config "
    "that leaves their namespace out, or relabelling that drops the series: /debug names the source's problem)")
"""The same case read from Prometheus, where the adapter reaches no exporter: what to check there instead."""


def lasting_cause(view: RuntimeView, metric: ServedMetric | None = None,
                  source: SourceState | None = None) -> str | None:
    """Why `metric` (None: every value, as KEDA's document has them) of `view` is not served for good, with
    what to change; None where its 503 is a moment's gap. Asked only of values the API does not serve.
    `source`: the refresh's source and its problems for the runtime, which the cause then leads with."""
    if not view.known:
        return _modelmesh_never_read(view, source)
    found = None if metric is None else _SIGNAL_CAUSES.get(metric)
    if found is None or metric is None or metric.value in view.held:  # held: a gap the view's reason explains
        return None
    signal, cause = found
    if signal not in view.signal_coverage:
        return cause
    if metric is ServedMetric.CACHE_PRESSURE:  # present, not held, and still none: no pod's cache use tells it
        served = view.values.get(metric)
        if served is not None and served.raw is None:
            return cause
    return None


def _modelmesh_never_read(view: RuntimeView, source: SourceState | None = None) -> str | None:
    """The cause where no Ready pod's load data was ever read, the source answering; else None."""
    if view.reason.startswith(NOT_SERVED_CAUSES) or view.scaled_to_zero:
        return None
    ready = [pod for pod in view.pods if pod.ready]
    if not ready or any(pod.age_s is not None for pod in ready):
        return None
    names = few([pod.name for pod in ready], 3)
    gpu_fresh = any(state == FRESH for pod in ready for signal, state in pod.signals if signal == SIGNAL_GPU)
    never = f"no ready pod's load data has been read since the adapter found the runtime ({names})"
    if source is not None:
        said = _source_says(source, {pod.name for pod in ready})
        if said is not None:
            return f"the {source[0]} source reads nothing of its ready pods: {said}"
        if source[0] == "prometheus":  # nothing of the adapter reaching the exporters: Prometheus does
            return f"{never}: {_PROMETHEUS_UNSEEN}, or the exporters cannot read ModelMesh; {_CHECK_MODELMESH}"
    if gpu_fresh:
        cause = (f"{never}, though their GPU readings are fresh: with the scrape source (the default), the exporters "
                 f"answer and cannot read ModelMesh; {_CHECK_MODELMESH}")
    else:
        cause = (f"{never}: with the scrape source (the default), the adapter does not reach their exporters (the "
                 f"sidecar in the pods, its port, NetworkPolicies), or they cannot read ModelMesh; {_CHECK_MODELMESH}")
    return cause if source is not None and source[0] == "scrape" else f"{cause}; {_PROMETHEUS_UNSEEN}"


def _source_says(source: SourceState, ready: set[str]) -> str | None:
    """What the source says fails for the runtime's Ready pods (or for the whole runtime), by reason, with one
    problem in its own words (its hint, the port scraped, included; the pod named, not its address:
    `unaddressed`); None where it says nothing."""
    _, problems = source
    named = [problem for problem in problems if problem.pod is None or problem.pod in ready]
    if not named:
        return None
    counted = Counter(problem.reason for problem in named)
    reasons = ", ".join(f"{reason} ({count} {'pod' if count == 1 else 'pods'})" if any(
        problem.pod is not None for problem in named if problem.reason == reason) else reason
        for reason, count in counted.items())
    first = named[0]
    return f"{reasons}; {first.pod + ': ' if first.pod else ''}{without_addresses(first.detail)}"
