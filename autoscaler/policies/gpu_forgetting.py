"""A runtime whose pods no longer have a GPU forgets it: its GPU term stops holding the recommendation.

A runtime remembers the signals it reported (`RuntimeMemory.seen`) so that a signal gone from every pod at once
holds the values that use it rather than dropping them: a GPU collector failing on every pod must never scale
the runtime down. But a runtime moved to CPU-only nodes (its exporters now run with `--no-gpu`, the Deployment
the same) then held its last GPU proposal for as long as the adapter ran: no scale-down, and no "no capacity"
warning. What tells the two apart is the exporter's own word: one with its GPU collector on publishes
`collector_success{collector="gpu"}` from its start, failing or not; one started with `--no-gpu` publishes no
`collector="gpu"` series at all (`PodSample.no_gpu_collector`, the GPU `absent` on that pod). So when every
Ready pod has fresh load data and says so, the runtime forgets its GPU: out of `seen`, its last proposal and
its `modelmesh_gpu_busy` memory dropped, said once at INFO. A source that cannot tell (Prometheus) never says
so, and keeps holding.

Once forgotten, only a pod that reports a GPU reading brings the GPU back, not one whose GPU collector is on and
failing: a default exporter on a CPU node publishes such a collector, and treating it as a GPU gone missing
would hold every CPU runtime for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

from autoscaler.model import RuntimeKey
from autoscaler.names import ServedMetric
from autoscaler.policies.recommendation import GPU
from autoscaler.policies.signals import SIGNAL_GPU, SignalStats
from autoscaler.policies.smoothing import SmoothState

log = logging.getLogger(__name__)

NO_GPU_COLLECTOR: Final = "no ready pod has a GPU collector (its exporter runs with --no-gpu)"
"""Why a runtime has no GPU signal, where its pods say so (the view's reason, /debug)."""

_GPU_BUSY: Final = ServedMetric.GPU_BUSY


def has_no_gpu(gpu: SignalStats, ready: int) -> bool:
    """Every Ready pod has fresh load data and an exporter without a GPU collector (the GPU `absent` on each)."""
    return ready > 0 and gpu.absent == ready


def remembers_gpu(seen: frozenset[str], proposals: Mapping[str, int],
                  smoothed: Mapping[ServedMetric, SmoothState]) -> bool:
    """Whether a runtime's memory holds anything of its GPU: the signal seen, a GPU proposal, a GPU busy value."""
    return SIGNAL_GPU in seen or GPU in proposals or _GPU_BUSY in smoothed


def forget_gpu(
    key: RuntimeKey, seen: frozenset[str], proposals: Mapping[str, int],
    smoothed: Mapping[ServedMetric, SmoothState],
) -> tuple[frozenset[str], dict[str, int], dict[ServedMetric, SmoothState]]:
    """The memory's `seen`, `proposals` and `smoothed` without the GPU, said once (this runtime will not remember
    its GPU again unless a pod reports one)."""
    last = proposals.get(GPU)
    held = f"its last GPU proposal ({last} pods) no longer holds the recommendation" if last is not None else (
        "its GPU no longer holds the recommendation")
    log.info("runtime %s forgets its GPU: %s; %s, which follows its other terms (a pod that reports a GPU "
             "reading again brings it back; a GPU collector that fails, as on a node without the driver, does "
             "not)", key, NO_GPU_COLLECTOR, held)
    return (seen - {SIGNAL_GPU}, {term: value for term, value in proposals.items() if term != GPU},
            {metric: state for metric, state in smoothed.items() if metric is not _GPU_BUSY})
