"""A pod that was Ready and stopped being so, still there and not terminating, counts as missing data for a while.

A pod that is not Ready used to be left out of the values at once, as if it served nothing. But the pod that fails
its readiness probe is most often the hot one (a saturated pod answers its probe late), and ModelMesh routes
requests between its pods itself (its own instance registry, not the Service's endpoints), so it may still be
serving. Left out, its load vanished from the values: pods at 400, 20 and 20 req/s with 100 req/s a pod went from
7 replicas to 1 on one failed probe, and a scale-down then removes that very pod first (the ReplicaSet's order).
The product's rule is never to scale down on missing data, so such a pod is *held*: it counts as a Ready pod with
its last good sample (fresh or stale, as a pod whose scrape failed), its name is in the view's `held`, and no
value falls while it lasts.

For `NOT_READY_HOLD_S` after it stopped being Ready (`PodSample.unready_since`, which discovery sets only for a
pod it saw Ready before and that is not terminating): a pod that crash-loops or stays unready must not block
scale-down for ever. Past that it is left out as before, said once at INFO. A pod never seen Ready (starting)
and one terminating are left out as always.

The time is counted on the running clock (`autoscaler.running_clock`), as the slow fall's is, not on the wall
clock: `unready_since` is a wall-clock time (when the watch saw the change, or the Ready condition's
`lastTransitionTime`), so the first refresh that sees the pod not Ready turns it into a running-clock start
(`UnreadyClocks`), a time in the future counting as "just stopped", and later refreshes keep that start. A wall
clock stepped back an hour used to hold the pod for an hour and 5 minutes (it was "not Ready for 0 s" all along).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final, TypeAlias

from autoscaler.model import PodSample, PodViews, RuntimeKey

log = logging.getLogger(__name__)

NOT_READY_HOLD_S: Final = 300.0
"""How long after it stopped being Ready a pod that was Ready still counts as missing data (`unready_since`):
longer than a probe's usual flap under load, short enough that a crash-looping pod delays a scale-down by
minutes, not for good."""

UnreadyClocks: TypeAlias = Mapping[str, tuple[float, float]]
"""Per pod not Ready with an `unready_since` (held or past the bound): that `unready_since`, and the running
clock's time its not-Ready spell began. A new `unready_since` (Ready again, then not) starts a new spell."""

NO_CLOCKS: Final[UnreadyClocks] = {}
"""No pod not Ready (never written to: one mapping serves every runtime)."""

HELD_KEY_PREFIX: Final = "pod "
"""The view's `held` names each held pod as `pod <name>` (beside the values and terms it holds)."""


def held_unready(pods: Iterable[PodSample], now: float, at: float,
                 before: UnreadyClocks) -> tuple[tuple[PodSample, ...], UnreadyClocks]:
    """The pods not Ready that count as missing data: seen Ready before, not terminating, and not Ready for at
    most `NOT_READY_HOLD_S` of running time (`at`, the running clock; `now`, the wall clock `unready_since` is
    read against); and each such pod's clock for the next refresh (`before`, the last refresh's)."""
    held: list[PodSample] = []
    clocks: dict[str, tuple[float, float]] = {}
    for pod in pods:  # a loop, not a generator: it runs for every runtime with a pod not Ready, most holding none
        t = pod.unready_since
        if t is None or pod.ready:
            continue
        kept = before.get(pod.name)
        start = kept[1] if kept is not None and kept[0] == t else at - max(0.0, now - t)  # future: just stopped
        clocks[pod.name] = (t, start)
        if at - start <= NOT_READY_HOLD_S:
            held.append(pod)
    return (tuple(held) if held else ()), clocks


def not_ready_for(pod: PodSample, at: float, clocks: UnreadyClocks) -> float:
    """How long `pod` has been not Ready, in running time (0 for a pod without a clock)."""
    clock = clocks.get(pod.name)
    return 0.0 if clock is None else max(0.0, at - clock[1])


def counted_as_ready(pods: Sequence[PodSample], held: Collection[str]) -> tuple[PodSample, ...]:
    """`pods`, with the `held` ones (by name) counted as Ready: the aggregation and the ranking then treat each as
    a Ready pod with its last good sample, fresh or stale, whose hold rules are the existing ones."""
    return tuple(replace(pod, ready=True) if pod.name in held else pod for pod in pods)


def shown_unready(views: PodViews, held: Collection[str]) -> PodViews:
    """`views`, with the `held` pods shown not Ready again (/debug, and the deletion-cost writer reads `ready`)."""
    return PodViews(tuple((row[0], False, *row[2:]) if row[0] in held else row
                          for row in views.rows))


def held_reasons(pods: Iterable[PodSample], at: float, clocks: UnreadyClocks) -> dict[str, str]:
    """Each held pod's entry in the view's `held`: why nothing falls, and until when."""
    reasons: dict[str, str] = {}
    for pod in pods:
        rps = pod.requests_per_second
        serving = f"was serving {rps:.4g} req/s" if rps is not None else "no load read from it yet"
        reasons[f"{HELD_KEY_PREFIX}{pod.name}"] = (
            f"not ready for {not_ready_for(pod, at, clocks):.0f} s ({serving}); counted as missing data, values may "
            f"rise, not fall, until it is Ready again, deleted, or not ready for {NOT_READY_HOLD_S:.0f} s")
    return reasons


def say_left_out(key: RuntimeKey, held_before: Collection[str], held_now: Collection[str],
                 pods: Iterable[PodSample], at: float, clocks: UnreadyClocks) -> None:
    """Say once, at INFO, each pod held at the last refresh that is left out now because it stayed not Ready past
    `NOT_READY_HOLD_S` (one Ready again, deleted or terminating needs no word)."""
    for pod in pods:
        if (pod.name in held_before and pod.name not in held_now and not pod.ready
                and pod.name in clocks):
            log.info("runtime %s: pod %s not ready for %.0f s (over %.0f s): left out of the values from now, as "
                     "a pod that serves nothing; the values may fall without it", key, pod.name,
                     not_ready_for(pod, at, clocks), NOT_READY_HOLD_S)
