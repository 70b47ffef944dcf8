"""How a held runtime's words (its `reason` and `held`: the log line, /debug) count the Ready pods on which a
signal is not fresh: `stale` and `missing` apart, as /debug's `pods[].signals` show each pod.

The docs define them apart (docs/design.md, Missing data): a signal is stale where its newest sample is too old
(the pod's exporter not read, hung, or its collector's reading kept from before), missing where the pod's exporter
answers without it while other pods report it. `SignalStats.missing` counts both, which the hold rules need; the
words did too, so a dead exporter's pod read `gpu missing on 1 of 3 ready pods`, which the troubleshooting sends to
the GPU's visibility instead of to the exporter that does not answer.

A load signal (requests, queue, cache) shares the load's timestamp: it is stale exactly on the pods whose data is
stale (`Aggregate.fresh` False), which the reason says once (`N of M ready pods stale`), so the rest of its count
is missing, without a pass over the pods. The GPU has a clock of its own (its reading may be old on a pod whose
load is fresh: a hung or failing GPU collector), so its states are counted from the pods.
"""

from __future__ import annotations

from typing import Final

from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.signals import MISSING, SIGNAL_GPU, STALE

_GPU_COLUMN: Final = 0
"""The GPU's place in each pod's (signal, state) row (`signals.SIGNALS`' order)."""


def not_fresh(agg: Aggregate, signal: str) -> tuple[int, int, int]:
    """(stale on a Ready pod whose load is fresh, stale on a Ready pod whose data is stale, missing) for `signal`,
    whose `SignalStats.missing` (their sum) is above 0: the signal is expected on every Ready pod."""
    if signal != SIGNAL_GPU:
        stale_pods = agg.ready - agg.n
        return 0, stale_pods, agg.signals[signal].missing - stale_pods
    alone = along = missing = 0
    for load_fresh, row in zip(agg.fresh, agg.pod_signals):  # noqa: B905  (an aggregate's per-pod tuples: one a pod)
        state = row[_GPU_COLUMN][1]
        if state == STALE:
            if load_fresh:
                alone += 1
            else:
                along += 1
        elif state == MISSING:
            missing += 1
    return alone, along, missing


def reason_words(agg: Aggregate, signal: str) -> list[str]:
    """The reason's words for `signal` (not fresh on some Ready pod), beside `N of M ready pods stale`, which
    already names the pods whose data is stale: what that does not explain, each state on its own."""
    alone, _, missing = not_fresh(agg, signal)
    words = []
    if alone:
        words.append(f"{signal} stale on {alone} of {agg.ready} ready pods; holding what uses it")
    if missing:
        words.append(f"{signal} missing on {missing} of {agg.ready} ready pods; holding what uses it")
    return words


def held_words(agg: Aggregate, signal: str) -> str:
    """Why a term reading `signal` is held, in /debug's words: `gpu stale on 1 ready pods`, `requests missing on
    2 ready pods`, or both, `cache stale on 1 and missing on 2 ready pods` (every Ready pod not fresh on it)."""
    alone, along, missing = not_fresh(agg, signal)
    stale = alone + along
    if stale and missing:
        return f"{signal} stale on {stale} and missing on {missing} ready pods"
    if stale:
        return f"{signal} stale on {stale} ready pods"
    return f"{signal} missing on {missing} ready pods"
