"""The replica bridge's lines about what one pass did: replicas carried and adopted (`PassWrites`), and the
RuntimeScales whose `Ready` reason changed (`ReasonChanges`).

A RuntimeScale's write is worth a line one at a time: `RuntimeScale ml/triton: ServingRuntime triton
spec.replicas 2 -> 3`. But a pass writes to many at once in two ordinary events: the bridge installed on a running
fleet (the shipped RuntimeScale has no `spec.replicas`, so the first pass adopts every runtime's: a line per
RuntimeScale was 1,000 lines at 1,000 runtimes), and a swing in load that scales hundreds of runtimes together
(200 lines up, 200 down). So the pass collects them and `flush` says them as `autoscaler.transition_log` says a
refresh's changed runtimes: one line each up to `NAMED` of a kind, else one line with the count and the first few
(`autoscaler.log_lists`); which RuntimeScales exactly is in their `status` and `kubectl get runtimescales`.
Ready reasons change together just as often (a new leader's first pass finds them all, an outage fails them all),
so they are said the same way, grouped by reason (`autoscaler.log_lists.say_each_or_grouped`).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from autoscaler.actuation.bridge_owners import ScaleId
from autoscaler.actuation.bridge_status import Verdict
from autoscaler.log_lists import say_each_or_counted, say_each_or_grouped

log = logging.getLogger("autoscaler.actuation.bridge")


class PassWrites:
    """Collects one pass's carried (`carried`) and adopted (`adopted`) replicas, then logs them (`flush`)."""

    def __init__(self) -> None:
        self._carried: list[tuple[ScaleId, str, int | None, int]] = []
        self._adopted: list[tuple[ScaleId, int]] = []
        self._set_back: list[tuple[ScaleId, str, int | None, int]] = []
        self._fought: list[Fight] = []

    def carried(self, key: ScaleId, runtime: str, found: int | None, wanted: int) -> None:
        """RuntimeScale `key`'s replicas written to ServingRuntime `runtime`, which had `found`."""
        self._carried.append((key, runtime, found, wanted))

    def adopted(self, key: ScaleId, replicas: int) -> None:
        """RuntimeScale `key` given its runtime's `replicas` (it was created without `spec.replicas`)."""
        self._adopted.append((key, replicas))

    def set_back(self, key: ScaleId, runtime: str, found: int | None, wanted: int) -> None:
        """ServingRuntime `runtime` was found at `found`, set outside RuntimeScale `key` (the first set-back of
        an episode, `ScaleMemory.set_back_level`), and set back to `wanted`: a WARNING. A tool that applies every
        ServingRuntime's manifest again sets them all at once: a WARNING each was 270 lines in 4 s at 300."""
        self._set_back.append((key, runtime, found, wanted))

    def fought(self, fight: Fight) -> None:
        """Another writer puts a runtime back as soon as it is set back (`Fight`): a WARNING. A GitOps tool that
        self-heals every ServingRuntime fights them all at once: said as set-backs are, one line for many."""
        self._fought.append(fight)

    def flush(self) -> None:
        adopted, carried, set_back = self._adopted, self._carried, self._set_back
        self._adopted, self._carried, self._set_back = [], [], []
        fought, self._fought = self._fought, []
        if fought:
            say_each_or_counted(log, fought, fight_line, lambda count, runtimes: (
                f"{count} ServingRuntimes' spec.replicas were set back to their RuntimeScales' asks "
                f"{fought[0].set_backs} or more times in {fought[0].window_s:.0f} s each, and each time set again by "
                f"another writer (a GitOps tool's self-heal, a mutating admission policy, another operator): "
                f"{runtimes}. They are now set back only at each full pass (every {fought[0].resync_s:.0f} s) while "
                "that goes on. Make that writer leave spec.replicas alone (Argo CD: ignoreDifferences on "
                "/spec/replicas, docs/operations.md), or delete the RuntimeScales to leave the replicas to it"),
                lambda fight: f"{fight.key[0]}/{fight.runtime} ({shown_replicas(fight.found)}, asked {fight.wanted})",
                level=logging.WARNING)
        def adopted_one(write: tuple[ScaleId, int]) -> str:
            (namespace, name), replicas = write
            return f"RuntimeScale {namespace}/{name}: spec.replicas adopted from the runtime: {replicas}"

        def adopted_shown(write: tuple[ScaleId, int]) -> str:
            (namespace, name), replicas = write
            return f"{namespace}/{name} ({replicas})"

        def carried_one(write: tuple[ScaleId, str, int | None, int]) -> str:
            (namespace, name), runtime, found, wanted = write
            return (f"RuntimeScale {namespace}/{name}: ServingRuntime {runtime} spec.replicas "
                    f"{shown_replicas(found)} -> {wanted}")

        def carried_shown(write: tuple[ScaleId, str, int | None, int]) -> str:
            (namespace, name), _, found, wanted = write
            return f"{namespace}/{name} ({shown_replicas(found)} -> {wanted})"

        say_each_or_counted(log, adopted, adopted_one, lambda count, scales: (
            f"{count} RuntimeScales: spec.replicas adopted from their runtimes: {scales}"), adopted_shown)
        say_each_or_counted(log, carried, carried_one, lambda count, scales: (
            f"{count} RuntimeScales: replicas carried to their ServingRuntimes' spec.replicas: {scales}"),
            carried_shown)

        def set_back_shown(write: tuple[ScaleId, str, int | None, int]) -> str:
            (namespace, _), runtime, found, wanted = write
            return f"{namespace}/{runtime} ({shown_replicas(found)} -> {wanted})"

        say_each_or_counted(log, set_back, lambda write: set_back_line(*write), lambda count, runtimes: (
            f"{count} ServingRuntimes' spec.replicas were set outside their RuntimeScales (by hand, or by a tool "
            f"that applies their manifests), and set back: {runtimes}. The RuntimeScales, which their HPAs "
            "scale, decide the runtimes' replicas. Change the HPAs' minReplicas/maxReplicas instead, and leave "
            "spec.replicas out of applied ServingRuntime manifests"), set_back_shown, level=logging.WARNING)


class Fight(NamedTuple):
    """ServingRuntime `runtime`, set outside RuntimeScale `key` to `found` again each time it was set back to
    `wanted`: `set_backs` within `window_s`; from now on set back only at each full pass (every `resync_s`)."""

    key: ScaleId
    runtime: str
    found: int | None
    wanted: int
    set_backs: int
    window_s: float
    resync_s: float


def fight_line(fight: Fight) -> str:
    """The WARNING for one runtime another writer fights over (`Fight`)."""
    (namespace, name), runtime = fight.key, fight.runtime
    return (f"ServingRuntime {namespace}/{runtime}: spec.replicas set back to {fight.wanted} (RuntimeScale "
            f"{namespace}/{name}, its HPA's ask) {fight.set_backs} times in {fight.window_s:.0f} s, and each time "
            f"set to {shown_replicas(fight.found)} again by another writer (a GitOps tool's self-heal, a mutating "
            f"admission policy, another operator): it is now set back only at each full pass (every "
            f"{fight.resync_s:.0f} s) while that goes on. Make that writer leave spec.replicas alone (Argo CD: "
            "ignoreDifferences on /spec/replicas, docs/operations.md), or delete the RuntimeScale to leave the "
            "replicas to it")


def set_back_line(key: ScaleId, runtime: str, found: int | None, wanted: int) -> str:
    """The line for one ServingRuntime `runtime` found at `found` (None: its spec.replicas removed), set outside
    RuntimeScale `key`, set back to `wanted`."""
    namespace, name = key
    done = "was removed" if found is None else f"was set to {found}"  # not "set to unset"
    return (f"ServingRuntime {namespace}/{runtime} spec.replicas {done} outside "
            f"RuntimeScale {namespace}/{name} (by hand, or by a tool that applies the ServingRuntime's manifest); "
            f"set back to {wanted}: the RuntimeScale, which its HPA scales, decides the runtime's replicas. Change "
            "the HPA's minReplicas/maxReplicas instead, and leave spec.replicas out of applied ServingRuntime "
            "manifests")


def shown_replicas(replicas: int | None) -> str:
    """A ServingRuntime's `spec.replicas` as its YAML shows it to the user: absent is `unset`, not Python's None."""
    return "unset" if replicas is None else str(replicas)


class ReasonChange(NamedTuple):
    """A RuntimeScale whose `Ready` reason changed this pass."""

    ready: bool
    key: ScaleId
    reason: str
    message: str


class ReasonChanges:
    """Collects one pass's new `Ready` reasons (`changed`), then logs them (`flush`): one line each, or, when more
    than ten changed, one line per reason with how many."""

    def __init__(self) -> None:
        self._changes: list[ReasonChange] = []

    def changed(self, key: ScaleId, outcome: Verdict) -> None:
        """RuntimeScale `key`'s `Ready` condition now has `outcome`'s reason, which it did not have before."""
        self._changes.append(ReasonChange(outcome.ready, key, outcome.reason, outcome.message))

    def flush(self) -> None:
        changes, self._changes = self._changes, []
        say_each_or_grouped(log, changes, one=_reason_line, state=_reason_state, many=_reasons_line,
                            shown=_scale_name, level=_reason_level)


def _reason_line(change: ReasonChange) -> str:
    namespace, name = change.key
    return f"RuntimeScale {namespace}/{name}: {change.reason}: {change.message}"


def _reason_state(change: ReasonChange) -> tuple[bool, str]:
    return change.ready, change.reason


def _reasons_line(count: int, state: tuple[bool, str], named: str, first: ReasonChange) -> str:
    namespace, name = first.key
    return f"{count} RuntimeScales now {state[1]}: {named} (e.g. {namespace}/{name}: {first.message})"


def _scale_name(change: ReasonChange) -> str:
    namespace, name = change.key
    return f"{namespace}/{name}"


def _reason_level(change: ReasonChange) -> int:
    return logging.INFO if change.ready else logging.WARNING
