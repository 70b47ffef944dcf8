"""Untimed, the copies ModelMesh never copies though their pods cannot serve them, and the note that names them.

Without `perModelConcurrencyLimit` ModelMesh asks for another copy of a model only when one copy's own requests reach
its flat `scaleUpRpmThreshold` (`--scaleup-rpm`, 2000 rpm unless set: rate_check.py), whatever its pod serves, and
nothing else moves the model's requests off its pods. A copy taking more than a pod serves but under that threshold
sits where it is and its pod's queue grows for as long as it takes that much: the rate check asks for floor(rate /
threshold) more copies, so a model's copies end at rate / (k + 1) each, and any model whose share a copy lands
between the two is stuck (at 2000 rpm and 20 req/s pods: one at 25 req/s on its one copy, one at 55 on two of 27.5).
No replica policy helps; the report names such models (`note`) and points to the annotation and the threshold.

Nor is a pod's queue relieved where its copies *together* take more than it serves while each is under the
threshold (`crowded`: at `--scaleup-rpm 1080` and 20 req/s pods, a model at 11 req/s beside one at 5.5 on one
pod): no copy there reaches the threshold, so none is copied, whatever the pod serves. A replay of a 12-hour trace
so queued one pod for 4 hours under every autoscaled policy (18.9% of requests delayed, fixed-max 0.03%): the
note names the hottest two copies of such pods and the threshold that would have copied the hotter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from autoscaler.simulation.pods import SimPod
from autoscaler.simulation.rate_check import SCALEUP_RPM_RANGE

SHOWN = 3
"""Models the note names, the most requests first; it counts the rest."""


class StuckCopies:
    """The copies routed more than `pod_rps` but under `flat_rps` (req/s) since the last routing, and what every
    model's such copies took (model -> [requests, the most one copy took a second])."""

    def __init__(self, pod_rps: float, flat_rps: float) -> None:
        self.pod_rps, self.flat_rps = pod_rps, flat_rps
        self.taken: dict[int, list[float]] = {}
        self.crowded: dict[tuple[int, int], list[float]] = {}
        """The pods over `pod_rps` whose every copy took at most that (none stuck alone) and none `flat_rps`, by
        their hottest two copies' models (hotter first): [requests those pods took, the most one took a second, the
        least its hottest copy took a second]."""
        self._now: list[tuple[int, float]] = []
        self._crowded_now: list[tuple[tuple[int, int], float, float]] = []

    def routed(self, ready: Sequence[SimPod]) -> None:
        """The copies stuck at the shares a routing gave the Ready pods: only a pod over `pod_rps` can hold one;
        and the pods crowded by copies each under both."""
        low, high = self.pod_rps, self.flat_rps
        self._now = [(model, share) for pod in ready if pod.rate > low
                     for model, share in pod.shares.items() if low < share < high]
        self._crowded_now = []
        for pod in ready:
            if pod.rate <= low or len(pod.shares) < 2 or max(pod.shares.values()) > low \
                    or max(pod.shares.values()) >= high:
                continue
            (first, hottest), (second, _) = sorted(pod.shares.items(), key=lambda item: (-item[1], item[0]))[:2]
            self._crowded_now.append(((first, second), pod.rate, hottest))

    def tick(self, seconds: float) -> None:
        for model, share in self._now:
            taken = self.taken.setdefault(model, [0.0, 0.0])
            taken[0] += share * seconds
            taken[1] = max(taken[1], share)
        for pair, rate, hottest in self._crowded_now:
            crowded = self.crowded.setdefault(pair, [0.0, 0.0, hottest])
            crowded[0] += rate * seconds
            crowded[1] = max(crowded[1], rate)
            crowded[2] = min(crowded[2], hottest)

    def clear(self) -> None:
        """Forget what was counted (the warm start's routings)."""
        self.taken, self._now, self.crowded, self._crowded_now = {}, [], {}, []


def note(runs: Sequence[Mapping[int, tuple[float, float]]], names: Sequence[str], pod_rps: float,
         scaleup_rpm: int) -> str | None:
    """The report's warning where some policy's run had stuck copies (`runs`: each policy's model -> (requests,
    most a copy took a second)); a model counted at its most requests under any policy. None: none."""
    worst: dict[int, tuple[float, float]] = {}
    for run in runs:
        for model, (requests, rps) in run.items():
            if requests >= 1.0 and requests > worst.get(model, (0.0, 0.0))[0]:
                worst[model] = (requests, rps)
    if not worst:
        return None
    ordered = sorted(worst.items(), key=lambda item: (-item[1][0], names[item[0]]))
    named = [f"{names[model]} ({requests:,.0f} requests at {rps:.3g} req/s a copy)"
             for model, (requests, rps) in ordered[:SHOWN]]
    more = len(ordered) - SHOWN
    listed = ", ".join(named) + (f" and {more} more model{'s' if more > 1 else ''}" if more > 0 else "")
    return (f"--queue-untimed: ModelMesh, not latency-based, asks for another copy of a model only when one copy "
            f"takes {scaleup_rpm} rpm ({scaleup_rpm / 60.0:.3g} req/s; --scaleup-rpm), whatever its pod serves: "
            f"copies that each took more than a pod serves ({pod_rps:g} req/s) but less than that were never copied "
            f"and their pods' queues grew: {listed} (the most requests such copies took under any policy). Annotate "
            f"the ServingRuntime perModelConcurrencyLimit, so that ModelMesh times the queue and copies at what a pod "
            f"serves, or set MM_SCALEUP_RPM_THRESHOLD under what a pod serves of one model (docs/operations.md, \"The "
            f"queue delay is always 0\"; --scaleup-rpm replays it)")


def crowded_note(runs: Sequence[Mapping[tuple[int, int], tuple[float, float, float]]], names: Sequence[str],
                 pod_rps: float, scaleup_rpm: int) -> str | None:
    """The report's warning where some policy's run had crowded pods (`runs`: each policy's `StuckCopies.crowded`);
    a pair counted at its most requests under any policy, and the threshold named under the least its hotter copy
    took in the pairs it names. None: none."""
    worst: dict[tuple[int, int], tuple[float, float, float]] = {}
    for run in runs:
        for pair, (requests, together, hottest) in run.items():
            if requests >= 1.0 and requests > worst.get(pair, (0.0, 0.0, 0.0))[0]:
                worst[pair] = (requests, together, hottest)
    if not worst:
        return None
    ordered = sorted(worst.items(), key=lambda item: (-item[1][0], names[item[0][0]], names[item[0][1]]))
    named = [f"{names[first]} with {names[second]} ({requests:,.0f} requests, up to {together:.3g} req/s together, "
             f"{names[first]}'s copy at {hottest:.3g} req/s or more)"
             for (first, second), (requests, together, hottest) in ordered[:SHOWN]]
    more = len(ordered) - SHOWN
    listed = "; ".join(named) + (f"; and {more} more pair{'s' if more > 1 else ''}" if more > 0 else "")
    # Under the named pairs' hotter copies (all 117 pairs of a day's replay put it at 179 rpm, for a pair of 3 req/s)
    under = max(SCALEUP_RPM_RANGE[0], math.floor(min(hottest for _, (_, _, hottest) in ordered[:SHOWN]) * 60.0))
    return (f"--queue-untimed: pods whose copies together took more than a pod serves ({pod_rps:g} req/s), each "
            f"copy under the {scaleup_rpm} rpm ({scaleup_rpm / 60.0:.3g} req/s; --scaleup-rpm) at which ModelMesh "
            f"asks for another, had none of them copied, and their queues grew (each pair on one pod, and the most "
            f"requests such a pod took under any policy): {listed}. ModelMesh copies a model for its own copy's "
            f"rate, not its pod's: set MM_SCALEUP_RPM_THRESHOLD under what the hotter copies named took (under "
            f"{under} rpm here; --scaleup-rpm {under} replays it), or annotate the ServingRuntime "
            f"perModelConcurrencyLimit, so that ModelMesh times the queue and copies at what a pod serves "
            f"(docs/operations.md, \"The queue delay is always 0\")")
