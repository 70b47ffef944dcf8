"""A runtime's policy annotations applied over its file policy, as `PolicyBook.policy_for` does when they change.

Annotations are edited by hand on a running runtime (`kubectl annotate`), so a slip is the common case: a bad
value is ignored with a warning, and the key keeps the value its annotation last had that worked (as the policy
and targets files keep their last good version). Falling back to the file's value instead quietly lowered a
runtime's floor (`min-replicas=6` to `6x`: back to the file's 2, scaling down) or removed its cap. Removing the
annotation is deliberate, and gives the file's value back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from autoscaler.model import RuntimeKey
from autoscaler.names import POLICY_ANNOTATION_PREFIX
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import FIELDS, HINTS, closest_field, parse_field, policy_problem, show_value

log = logging.getLogger("autoscaler.policies.config")

Value = float | int | None

NEAR_MISSES: Final = {
    spelling: name
    for name in FIELDS
    for spelling in (name, name.replace("_", "-"), name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:]))
}
"""Annotation names (after the last `/` or `.`) that spell a policy key: under another prefix, a near miss."""


@dataclass(frozen=True, slots=True)
class Written:
    """One policy annotation as written: its name, its text, and the value it gives its key."""

    annotation: str
    raw: str
    value: Value


@dataclass(slots=True)
class AnnotationMemory:
    """What one runtime's annotations last gave: each key's last good annotation, and the mistakes warned about."""

    last_good: dict[str, Written] = field(default_factory=dict)
    """Per policy key, the annotation that last set it and worked: kept while a later edit of it is ignored."""
    warned: set[tuple[str, str]] = field(default_factory=set)
    """(annotation, text) of the mistakes warned about that are still written: warned once per distinct value,
    not again whenever another annotation of the runtime changes."""


@dataclass(frozen=True, slots=True)
class Annotated:
    """The policy the annotations make, where each key they set came from, and each key's ignored annotation."""

    policy: RuntimePolicy
    origins: dict[str, str]
    ignored: dict[str, str]
    """Per policy key, `annotation='text': why` of the annotation ignored for it (shown in /debug)."""


def apply_annotations(
    key: RuntimeKey, base: RuntimePolicy, annotations: tuple[tuple[str, str], ...], memory: AnnotationMemory,
    origin_below: Callable[[str], str],
) -> Annotated:
    """`base` with the runtime's policy annotations applied together (a pair such as min and max replicas is
    checked as a pair, not in name order against the file's other bound); an annotation that cannot be used is
    ignored, its key keeping its last good annotation's value (`memory`), else `base`'s (from `origin_below`)."""
    fresh: dict[str, Written] = {}
    ignored: dict[str, tuple[Written, str]] = {}
    warnings: dict[tuple[str, str], str] = {}
    for annotation, raw in annotations:
        _read_one(key, annotation, raw, fresh, ignored, warnings)
    chosen = dict(fresh)
    for name in ignored:
        if name not in chosen and name in memory.last_good:
            chosen[name] = memory.last_good[name]
    policy = _settle(base, chosen, fresh, memory, ignored)
    for name, (written, why) in ignored.items():
        below = f"{name} {show_value(getattr(base, name))} ({origin_below(name)})"
        warnings[(written.annotation, written.raw)] = _ignored_text(
            key, name, written, why, chosen.get(name), getattr(policy, name), below)
    _warn_new(memory, warnings)
    memory.last_good = dict(chosen)  # a valid whole: what `_settle` kept
    return Annotated(
        policy,
        {name: f"annotation {w.annotation}" + ("" if fresh.get(name) == w else f" (its last good value, {w.raw!r})")
         for name, w in chosen.items()},
        {name: f"{w.annotation}={w.raw!r}: {why}" for name, (w, why) in ignored.items()},
    )


def _read_one(key: RuntimeKey, annotation: str, raw: str, fresh: dict[str, Written],
              ignored: dict[str, tuple[Written, str]], warnings: dict[tuple[str, str], str]) -> None:
    """Parse one annotation into `fresh` (or `ignored`, or `warnings` when it names no key of ours)."""
    if not annotation.startswith(POLICY_ANNOTATION_PREFIX):
        name = NEAR_MISSES[annotation[max(annotation.rfind("/"), annotation.rfind(".")) + 1:]]
        warnings[(annotation, raw)] = (
            f"runtime {key}: annotation {annotation}={raw!r} is not read: policy annotations start with "
            f"{POLICY_ANNOTATION_PREFIX!r}; write {POLICY_ANNOTATION_PREFIX}{name.replace('_', '-')}")
        return
    name = annotation.removeprefix(POLICY_ANNOTATION_PREFIX).replace("-", "_")
    if name not in HINTS:  # the hint in the annotation's own spelling, not the file key's
        close = closest_field(name)
        hint = f" (did you mean {POLICY_ANNOTATION_PREFIX}{close.replace('_', '-')}?)" if close else ""
        warnings[(annotation, raw)] = f"runtime {key}: ignoring annotation {annotation}={raw!r}: no such " \
                                      f"policy annotation{hint}"
        return
    try:
        value = parse_field(name, raw)
    except ValueError as exc:
        ignored[name] = (Written(annotation, raw, None), str(exc))
        return
    if name in fresh:
        warnings[(annotation, raw)] = (f"runtime {key}: annotations {fresh[name].annotation} and {annotation} both "
                                       f"set {name}; using {annotation}={raw!r}")
    fresh[name] = Written(annotation, raw, value)
    ignored.pop(name, None)


def _settle(base: RuntimePolicy, chosen: dict[str, Written], fresh: dict[str, Written], memory: AnnotationMemory,
            ignored: dict[str, tuple[Written, str]]) -> RuntimePolicy:
    """`base` with `chosen` applied, leaving out (into `ignored`) what is out of range: a fresh annotation gives
    way to its last good value, a last good value to `base`'s. Both bounds written and crossed (`min-replicas=10
    max-replicas=5`, a swapped pair) are both ignored: neither is what was meant."""
    while True:
        policy = replace(base, **{n: w.value for n, w in chosen.items()})  # type: ignore[arg-type]
        problem = policy_problem(policy)
        if problem is None:
            return policy
        name, why = problem
        culprits = [name] if name in chosen else ["min_replicas"]  # max below min: the other annotated bound
        if name == "max_replicas" and "min_replicas" in chosen and "max_replicas" in chosen:
            culprits = [n for n in ("min_replicas", "max_replicas") if chosen[n] == fresh.get(n)] or culprits
        for culprit in culprits:
            if culprit not in chosen:  # cannot happen: `base` was checked when the book was made
                return base
            written = chosen.pop(culprit)
            if fresh.get(culprit) == written:
                ignored[culprit] = (written, why)
                kept = memory.last_good.get(culprit)
                if kept is not None and kept.value != written.value:
                    chosen[culprit] = kept


def _ignored_text(key: RuntimeKey, name: str, written: Written, why: str, kept: Written | None, value: Value,
                  below: str) -> str:
    """The warning for an ignored annotation: what was written and why, what value applies now, what to write;
    `below`: the key's value without the annotation, and where it comes from."""
    if kept is not None and kept.value == value:
        now = (f"the runtime keeps {name} {show_value(value)}, the last good value of {kept.annotation}, until it "
               f"is fixed: write {kept.annotation}={kept.raw} to keep it, or remove the annotation for {below}")
    else:
        now = f"the runtime uses {below} meanwhile: fix the annotation, or remove it to keep that"
    return f"runtime {key}: ignoring annotation {written.annotation}={written.raw!r}: {why}; {now}"


def _warn_new(memory: AnnotationMemory, warnings: dict[tuple[str, str], str]) -> None:
    """Log the warnings not logged yet for the same annotation and text; forget those no longer written."""
    for written, message in warnings.items():
        if written not in memory.warned:
            log.warning("%s", message)
    memory.warned = set(warnings)
