"""A pod read without its GPU busy keeps its last good one, at that reading's own old time (docs/design.md,
Missing data): the partial gap, beside the whole-pod one of a failed scrape or a pod gone from Prometheus's answer.

The GPU collector can fail (NVML lost the GPU, a driver reload, DCGM's series gone) while ModelMesh is read: the
pod's load signals are fresh, its GPU busy is not there. Left without one, the pod dropped out of the GPU's power
mean, and the idle pods' GPUs lost raised `modelmesh_gpu_busy` over the pods left (0.541 to 0.601 with one of
three idle pods' GPU lost), then made it fall at the slow-fall rate once back. Kept at its last reading with that
reading's time and marked held (`PodSample.gpu_held`), the pod counts at it (`Aggregate.gpu_pods`) while it is
recent, and its GPU is missing from the first reading without one: the hold rules apply at once (a reviewer: with
the kept value taken as fresh until `max_staleness_s`, a hot pod's real fall beside it lowered `modelmesh_gpu_busy`
and the replicas within those 45 s, where DESIGN §6 says a signal absent while the pod reported it before is
missing). Never read as zero, nor as the GPUs still answering: the value is the pod's last good one.
"""

from __future__ import annotations

from dataclasses import replace

from autoscaler.model import PodSample


def with_last_gpu(sample: PodSample, last: PodSample | None) -> PodSample:
    """`sample`, or, where it has no GPU busy and `last` (the pod's last good sample) had one, `sample` with that
    busy and its time (`last.gpu_sampled_at`, or `last.sampled_at` where one time stood for both: an old time
    either way, never this reading's). Not for a pod whose exporter says it has no GPU collector (`--no-gpu`: the
    GPU is absent, not missing)."""
    if sample.gpu_busy is not None or sample.no_gpu_collector or last is None or last.gpu_busy is None:
        return sample
    at = last.sampled_at if last.gpu_sampled_at is None else last.gpu_sampled_at
    if at is None:
        return sample
    return replace(sample, gpu_busy=last.gpu_busy, gpu_sampled_at=at, gpu_held=True)


def with_gpu_read(last: PodSample, sample: PodSample) -> PodSample:
    """The pod's last good load (`last`) held beside the GPU reading of `sample`, an answer without load data
    (an exporter restarted with its ModelMesh collector failing): that GPU busy at its own time, a kept one's
    mark cleared (it was held at every refresh after, its GPU read as stale)."""
    return replace(last, gpu_busy=sample.gpu_busy, gpu_sampled_at=sample.gpu_sampled_at, gpu_held=False)

