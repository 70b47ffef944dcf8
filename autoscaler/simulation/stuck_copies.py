"""Untimed, the copies ModelMesh never copies though their pods cannot serve them, and the note that names them.

Without `perModelConcurrencyLimit` ModelMesh asks for another copy of a model only when one copy's own requests reach
its flat `scaleUpRpmThreshold` (`--scaleup-rpm`, 2000 rpm unless set: rate_check.py), whatever its pod serves, and
nothing else moves the model's requests off its pods. A copy taking more than a pod serves but under that threshold
sits where it is and its pod's queue grows for as long as it takes that much: the rate check asks for floor(rate /
threshold) more copies, so a model's copies end at rate / (k + 1) each, and any model whose share a copy lands
between the two is stuck (at 2000 rpm and 20 req/s pods: one at 25 req/s on its one copy, one at 55 on two of 27.5).
No replica policy helps; the report names such models (`note`) and points to the annotation and the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.simulation.pods import SimPod

SHOWN = 3
"""Models the note names, the most requests first; it counts the rest."""


class StuckCopies:
    """The copies routed more than `pod_rps` but under `flat_rps` (req/s) since the last routing, and what every
    model's such copies took (model -> [requests, the most one copy took a second])."""

    def __init__(self, pod_rps: float, flat_rps: float) -> None:
        self.pod_rps, self.flat_rps = pod_rps, flat_rps
        self.taken: dict[int, list[float]] = {}
        self._now: list[tuple[int, float]] = []

    def routed(self, ready: Sequence[SimPod]) -> None:
        """The copies stuck at the shares a routing gave the Ready pods: only a pod over `pod_rps` can hold one."""
        low, high = self.pod_rps, self.flat_rps
        self._now = [(model, share) for pod in ready if pod.rate > low
                     for model, share in pod.shares.items() if low < share < high]

    def tick(self, seconds: float) -> None:
        for model, share in self._now:
            taken = self.taken.setdefault(model, [0.0, 0.0])
            taken[0] += share * seconds
            taken[1] = max(taken[1], share)

    def clear(self) -> None:
        """Forget what was counted (the warm start's routings)."""
        self.taken, self._now = {}, []


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
