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

Only fresh data ends the spell, not the pod turning Ready: a pod that crash-loops turns Ready for a few seconds
between restarts (its ModelMesh failing, no request rate read), and the pod watch forgets `unready_since` then.
The 5 minutes started over at each blip, and during it the pod was a Ready pod missing its data, held with no
limit: the values never fell. So a pod Ready again with no request rate read since its last good sample keeps
its spell's clock (the "missing on a Ready pod" hold counts toward the same 5 minutes), past them it is left out
Ready or not, and it counts again once it reports a fresh rate. Left out while Ready, /debug shows it `ready: false`
beside kubectl's Ready, so its row says why (`left_out_words`), as a held pod's says its `held` words.

The time is counted on the running clock (`autoscaler.running_clock`), as the slow fall's is, not on the wall
clock: `unready_since` is a wall-clock time (when the watch saw the change, or the Ready condition's
`lastTransitionTime`), so the first refresh that sees the pod not Ready turns it into a running-clock start
(`UnreadyClocks`), a time in the future counting as "just stopped", and later refreshes keep that start. A wall
clock stepped back an hour used to hold the pod for an hour and 5 minutes (it was "not Ready for 0 s" all along).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final, TypeAlias

from autoscaler.model import PodSample, PodViews, RuntimeKey

log = logging.getLogger(__name__)

NOT_READY_HOLD_S: Final = 300.0
"""How long after it stopped being Ready a pod that was Ready still counts as missing data (`unready_since`):
longer than a probe's usual flap under load, short enough that a crash-looping pod delays a scale-down by
minutes, not for good."""

UnreadyClocks: TypeAlias = Mapping[str, tuple[float, float, bool]]
"""Per pod that stopped being Ready and has not reported fresh data since (held, past the bound, or Ready again
with nothing new to read yet): the time of its last good sample when its spell began (-inf: none), the running
clock's time the spell began, and whether it was past the bound (left out) at that refresh. Only fresh data
ends a spell: a crash-looping pod Ready for a few seconds between its restarts used to start its 5 minutes over at
each, and held the values for good."""

NO_CLOCKS: Final[UnreadyClocks] = {}
"""No pod not Ready (never written to: one mapping serves every runtime)."""

_NO_NAMES: Final[frozenset[str]] = frozenset()
"""No Ready pod left out (one shared empty set)."""

HELD_KEY_PREFIX: Final = "pod "
"""The view's `held` names each held pod as `pod <name>` (beside the values and terms it holds)."""


def held_unready(pods: Iterable[PodSample], now: float, at: float, before: UnreadyClocks,
                 max_staleness_s: float) -> tuple[tuple[PodSample, ...], UnreadyClocks, frozenset[str]]:
    """The pods not Ready that count as missing data: seen Ready before, not terminating, and not Ready for at
    most `NOT_READY_HOLD_S` of running time (`at`, the running clock; `now`, the wall clock `unready_since` is
    read against); each spell's clock for the next refresh (`before`, the last refresh's); and the Ready pods
    left out: back from a spell over the bound with no fresh data since, which the "missing on a Ready pod" hold
    would otherwise hold without limit (a pod Ready for seconds between the restarts of a crash loop)."""
    if not before:  # most runtimes that come here, most refreshes: no spell to carry on (`_new_spells`)
        return _new_spells(pods, now, at)
    held: list[PodSample] = []
    clocks: dict[str, tuple[float, float, bool]] = {}
    left_out: set[str] = set()
    for pod in pods:  # a loop, not a generator: it runs for every runtime with a pod not Ready, most holding none
        kept = before.get(pod.name)
        if pod.ready:
            if kept is None or reports_fresh_data(pod, kept[0], now, max_staleness_s):  # back, or never away
                continue
            over = at - kept[1] > NOT_READY_HOLD_S
            clocks[pod.name] = (kept[0], kept[1], over)
            if over:
                left_out.add(pod.name)
            continue
        t = pod.unready_since
        if t is None:
            continue
        clock = _spell_start(pod, t, now, at) if kept is None else (kept[0], kept[1], at - kept[1] > NOT_READY_HOLD_S)
        clocks[pod.name] = clock
        if not clock[2]:
            held.append(pod)
    return (tuple(held) if held else ()), clocks, (frozenset(left_out) if left_out else _NO_NAMES)


def _new_spells(
    pods: Iterable[PodSample], now: float, at: float,
) -> tuple[tuple[PodSample, ...], UnreadyClocks, frozenset[str]]:
    """`held_unready` where no pod had a clock at the last refresh: a Ready pod then has no spell to end or carry
    on, so it is passed over on its `ready` alone, as before crash loops were followed (37dde0ab looked every pod
    up in the clocks, Ready ones too: 5% of a refresh's instructions at 10,000 pods with 2% not Ready), and a pod
    not Ready starts its spell. The same pods, clocks (in the pods' order) and no pod left out."""
    held: list[PodSample] = []
    clocks: dict[str, tuple[float, float, bool]] = {}
    for pod in pods:  # a loop, not a generator: most pods are Ready and cost one test
        if pod.ready:
            continue
        t = pod.unready_since
        if t is None:
            continue
        clock = clocks[pod.name] = _spell_start(pod, t, now, at)
        if not clock[2]:
            held.append(pod)
    return (tuple(held) if held else ()), clocks, _NO_NAMES


def _spell_start(pod: PodSample, unready_since: float, now: float, at: float) -> tuple[float, float, bool]:
    """The clock of a spell that begins at this refresh: the pod's last good sample (-inf: none), the running
    clock's time it stopped being Ready (a time in the future counts as "just stopped"), and whether that is
    already past the bound (a pod found not Ready long ago, as when the adapter starts)."""
    start = at - max(0.0, now - unready_since)
    return (-math.inf if pod.sampled_at is None else pod.sampled_at), start, at - start > NOT_READY_HOLD_S


def reports_fresh_data(pod: PodSample, held_sample_at: float, now: float, max_staleness_s: float) -> bool:
    """Whether a pod Ready again has a request rate read after the sample it was held with (`held_sample_at`),
    and still fresh: only that ends its spell (a pod whose ModelMesh keeps failing reports none; its exporter's
    first rates after a restart come a read later). Both times are the source's, so a step of the wall clock
    the pod watch stamps `unready_since` with cannot make a pod back for good look as if it never came back."""
    sampled_at = pod.sampled_at
    return (pod.requests_per_second is not None and sampled_at is not None and sampled_at > held_sample_at
            and now - sampled_at <= max_staleness_s)


def not_ready_for(pod: PodSample, at: float, clocks: UnreadyClocks) -> float:
    """How long `pod` has been not Ready, in running time (0 for a pod without a clock)."""
    clock = clocks.get(pod.name)
    return 0.0 if clock is None else max(0.0, at - clock[1])


def counted_as_ready(pods: Sequence[PodSample], held: Collection[str],
                     left_out: Collection[str] = _NO_NAMES) -> tuple[PodSample, ...]:
    """`pods`, with the `held` ones (by name) counted as Ready: the aggregation and the ranking then treat each as
    a Ready pod with its last good sample, fresh or stale, whose hold rules are the existing ones; and the
    `left_out` ones as not Ready, never seen Ready: a pod that serves nothing, as it is past the bound."""
    return tuple(replace(pod, ready=True) if pod.name in held
                 else replace(pod, ready=False, unready_since=None) if pod.name in left_out
                 else pod for pod in pods)


def shown_unready(views: PodViews, held: Collection[str]) -> PodViews:
    """`views`, with the `held` pods shown not Ready again (/debug, and the deletion-cost writer reads `ready`)."""
    return PodViews(tuple((row[0], False, *row[2:]) if row[0] in held else row
                          for row in views.rows))


def held_reasons(pods: Iterable[PodSample], at: float, clocks: UnreadyClocks) -> dict[str, str]:
    """Each held pod's entry in the view's `held`: why nothing falls, and until when."""
    return {f"{HELD_KEY_PREFIX}{pod.name}": held_words(pod, at, clocks) for pod in pods}


def held_words(pod: PodSample, at: float, clocks: UnreadyClocks) -> str:
    """Why a pod not Ready is counted as a Ready pod missing its data, and until when: its entry in the view's
    `held`, and its own `reason` in /debug's `pods`, where it shows `ready: false` and `counted: true`."""
    rps = pod.requests_per_second
    serving = f"was serving {rps:.4g} req/s" if rps is not None else "no load read from it yet"
    return (f"not ready for {not_ready_for(pod, at, clocks):.0f} s ({serving}); counted as missing data, values may "
            f"rise, not fall, until it is Ready with a fresh rate read, deleted, or not ready for "
            f"{NOT_READY_HOLD_S:.0f} s")


def left_out_words(name: str, at: float, clocks: UnreadyClocks) -> str:
    """Why a pod Ready in Kubernetes is counted as not Ready (back from a spell past the bound, no fresh rate read
    since): its `reason` in /debug's `pods`, where it shows `ready: false` while kubectl shows it Ready. Without
    it a user saw the two disagree and no word; the INFO line that said so came once, minutes before."""
    clock = clocks.get(name)
    away = 0.0 if clock is None else max(0.0, at - clock[1])
    return (f"Ready, but no fresh request rate read since it stopped being Ready {away:.0f} s ago (over "
            f"{NOT_READY_HOLD_S:.0f} s; a crash loop's moments of Ready bring none): counted as not Ready, left out "
            f"of the values as a pod that serves nothing, until it reports a fresh rate")


def say_left_out(key: RuntimeKey, before: UnreadyClocks, clocks: UnreadyClocks, at: float) -> None:
    """Say once, at INFO, each pod left out now that was within `NOT_READY_HOLD_S` at the last refresh, not Ready
    or Ready again with no fresh data since (one that reported fresh data, deleted or terminating needs no word)."""
    for name, clock in clocks.items():
        last = before.get(name)
        if clock[2] and last is not None and not last[2]:
            log.info("runtime %s: pod %s not ready for %.0f s (over %.0f s): left out of the values from now, as "
                     "a pod that serves nothing, until it reports fresh data; the values may fall without it",
                     key, name, max(0.0, at - clock[1]), NOT_READY_HOLD_S)
