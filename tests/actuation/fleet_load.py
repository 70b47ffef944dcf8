"""A runtime of any number of pods whose load a test sets pod by pod, for the ranking hold's tests over fleets and
need weights other than the defaults, and the check those tests share: may the ReplicaSet, by the costs on the
pods, remove a pod the ranking clearly needs while a less needed one stays?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.sources.base import SourceDefaults
from tests.actuation.conftest import KEY


class FleetLoad(SourceDefaults):
    """`pods` Ready with fresh data at the request rates of `load` (a Deployment of as many replicas). Without
    `cache_fill` the exporter reports no cache fill (it cannot read it); with `gpu_tracks_load` each pod's GPU is
    busy in step with its load (busy = rps / 200), as on a runtime whose every request uses the GPU. The pods of
    `scrapes_failing` stay Ready, their exporters' last samples two minutes old (not fresh)."""

    name = "stand-in"
    errors: dict[str, int] = {}

    def __init__(self, pods: Sequence[str], *, cache_fill: bool = True, gpu_tracks_load: bool = False) -> None:
        self.pods = tuple(pods)
        self.load: Mapping[str, float] = dict.fromkeys(self.pods, 90.0)
        self.cache_fill, self.gpu_tracks_load = cache_fill, gpu_tracks_load
        self.scrapes_failing: frozenset[str] = frozenset()

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        samples = tuple(PodSample(
            name, sampled_at=now - (120 if name in self.scrapes_failing else 1), requests_per_second=self.load[name],
            queue_delay_s=0.0, lru_age_s=900.0,
            cache_used_ratio=0.5 if self.cache_fill else None, models_loaded=3.0,
            gpu_busy=min(1.0, self.load[name] / 200) if self.gpu_tracks_load else None) for name in self.pods)
        return [RuntimeSnapshot(KEY, samples, now, replicas=len(self.pods))]

    async def close(self) -> None:
        return None


def ranking(view: RuntimeView) -> dict[str, int]:
    """The cost this refresh's ranking gives each Ready pod with fresh data."""
    return {name: cost for name, ready, fresh, cost in view.pods.deletion_costs()
            if ready and fresh and cost is not None}


def clearly_needed_may_go(ranked: Mapping[str, int], carried: Mapping[str, int], removing: int, slack: int) -> str:
    """A pod the ReplicaSet may remove (lowest carried cost first, ties in any order) while a pod ranked more than
    `slack` below it stays, said as a user reads it; '' when no choice it may make does that."""
    pods = sorted(carried, key=lambda pod: carried[pod])
    last = carried[pods[removing - 1]]
    surely = [pod for pod in pods if carried[pod] < last]
    tied = [pod for pod in pods if carried[pod] == last]
    above = [pod for pod in pods if carried[pod] > last]
    tied_going = removing - len(surely)  # how many of the tied pods go, any of them
    for going in surely + tied:
        for staying in above + tied:
            if going == staying or ranked.get(going, -1) <= ranked.get(staying, -1) + slack:
                continue
            if going in tied and staying in tied and not 1 <= tied_going <= len(tied) - 1:
                continue
            if going in surely and staying in tied and tied_going == len(tied):
                continue
            return (f"{going} (ranked {ranked.get(going)}, carries {carried[going]}) may go while {staying} "
                    f"(ranked {ranked.get(staying)}) stays")
    return ""
