"""Which pod object a pod's series and held sample are of, where Prometheus knows only a pod's name.

Prometheus names a pod's series by namespace and pod name (its service discovery's labels), and so do the
source's answers and what it holds of each pod. A pod deleted and created again under its name (a
StatefulSet-like runtime, a hand-made pod, a name given again) is another pod, an empty one, and two things of the
old one reached it:
- **the old pod's series**, still within Prometheus's lookback: nothing marks them stale until Prometheus's
  discovery drops the old target (Thanos, Mimir and VictoriaMetrics mark none), and they were read as the new
  pod's fresh load. A pod's own series cannot predate the pod, whose exporter runs in it: a reading sampled
  before the pod was created (`PodTarget.created_at`, the Kubernetes creation time) is an earlier pod's, and is
  not read (`of_this_pod`). Where the API server's clock runs ahead of Prometheus's by more than the new pod takes
  to start (its first ModelMesh reading, tens of seconds), its first readings wait as long; they are never
  another pod's.
- **the old pod's last good sample**, held while a pod has no series (as for any pod missing from an answer):
  it is held for the pod object it was read of (its uid, its creation time) alone (`HeldFor`), as the scrape
  source holds its samples (`ScrapeSource._fallback`).

The exporter's own `modelmesh_exporter_pod_info` carries the pod's uid where the sidecar is given it, but only
one series of it: the signals' series carry no uid to join on, so the creation time is what tells them apart.
"""

from __future__ import annotations

from collections.abc import Collection, MutableMapping
from dataclasses import replace

from autoscaler.model import PodSample
from autoscaler.sources.base import PodTarget
from autoscaler.sources.prometheus_promql import PodRef

PodObject = tuple[str | None, float | None]
"""A pod object as discovery tells it: its uid and creation time (None where unknown: a targets file)."""


def of_this_pod(sample: PodSample | None, created_at: float | None) -> PodSample | None:
    """`sample` without what was sampled before the pod was created (an earlier pod's of the name): its load
    reading, its GPU reading, or both (None)."""
    if sample is None or created_at is None:
        return sample
    load_before = sample.sampled_at is not None and sample.sampled_at < created_at
    gpu_before = sample.gpu_sampled_at is not None and sample.gpu_sampled_at < created_at
    if load_before and (gpu_before or sample.gpu_sampled_at is None):
        return None
    if load_before:
        return PodSample(name=sample.name, gpu_sampled_at=sample.gpu_sampled_at, gpu_busy=sample.gpu_busy)
    return replace(sample, gpu_sampled_at=None, gpu_busy=None) if gpu_before else sample


class HeldFor:
    """The pod object each held sample was read of."""

    def __init__(self) -> None:
        self._objects: dict[PodRef, PodObject] = {}

    def held(self, ref: PodRef, target: PodTarget, last: MutableMapping[PodRef, PodSample]) -> PodSample | None:
        """The pod's last good sample in `last`; dropped from it where it was another pod object's of the name."""
        now = (target.uid, target.created_at)
        if self._objects.setdefault(ref, now) != now:
            self._objects[ref] = now
            last.pop(ref, None)
        return last.get(ref)

    def forget(self, known: Collection[PodRef]) -> None:
        """Drop the pods discovery no longer lists."""
        for ref in [ref for ref in self._objects if ref not in known]:
            del self._objects[ref]
