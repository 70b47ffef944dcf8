"""Per bucket of a replay: how many pods sat Ready and idle all through it, and whether others ran full.

An HPA on mean utilization counts an idle pod like any other: after a jump in load it adds a pod, ModelMesh may
place no copy there (a model's requests go only to pods holding it), and the idle pod holds the mean under the
target while the other pods queue, for as long as the load lasts. The report can say so only if the replay
kept what each pod did (stuck_baseline.py reads it from the timeline).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from autoscaler.simulation.pods import SimPod

IDLE_BUSY: Final = 0.05
"""A pod under this share busy in a tick took next to no requests: idle."""
FULL_BUSY: Final = 0.99
"""A pod at this share busy in a tick served all it could: requests queued on it."""


@dataclass(frozen=True, slots=True)
class BucketUse:
    """What the pods did over one bucket."""

    idle_pods: int  # pods Ready and idle in every tick of the bucket
    full_share: float  # share of the bucket's ticks in which some Ready pod ran full
    mean_busy: float  # the Ready pods' mean busy, averaged over the bucket's ticks


class IdleWatch:
    """Looks at the pods after every tick; `bucket_done` sums a bucket up and starts the next."""

    def __init__(self) -> None:
        self._idle: set[SimPod] | None = None  # None: no tick of this bucket seen yet
        self._ticks = 0
        self._full_ticks = 0
        self._busy = 0.0

    def tick(self, pods: Iterable[SimPod]) -> None:
        idle: set[SimPod] = set()
        ready = 0
        total = 0.0
        full = False
        for pod in pods:
            if not pod.ready or not pod.busy:
                continue
            busy = pod.busy[-1]  # this tick's, as `serve` just appended it
            ready += 1
            total += busy
            if busy < IDLE_BUSY:
                idle.add(pod)
            elif busy >= FULL_BUSY:
                full = True
        self._idle = idle if self._idle is None else self._idle & idle
        self._ticks += 1
        self._full_ticks += full
        self._busy += total / ready if ready else 0.0

    def bucket_done(self) -> BucketUse:
        ticks = max(1, self._ticks)
        use = BucketUse(len(self._idle or ()), self._full_ticks / ticks, self._busy / ticks)
        self._idle, self._ticks, self._full_ticks, self._busy = None, 0, 0, 0.0
        return use
