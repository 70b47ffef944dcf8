"""A runtime's policy annotations applied over its file policy, as `PolicyBook.policy_for` does when they change.

Annotations are edited by hand on a running runtime (`kubectl annotate`), so a slip is the common case: a bad
value is ignored with a warning, and the key keeps the value its annotation last had that worked (as the policy
and targets files keep their last good version). Falling back to the file's value instead quietly lowered a
runtime's floor (`min-replicas=6` to `6x`: back to the file's 2, scaling down) or removed its cap. Removing the
annotation is deliberate, and gives the file's value back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Final

from autoscaler.model import RuntimeKey
from autoscaler.names import POLICY_ANNOTATION_PREFIX
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import (
    ECHO_LIMIT,
    FIELDS,
    RefusedValue,
    above_range,
    closest_field,
    echoed,
    parse_field,
    policy_problem,
    show_value,
)

log = logging.getLogger("autoscaler.policies.config")

Value = float | int | None

ANNOTATIONS: Final = {POLICY_ANNOTATION_PREFIX + name.replace("_", "-"): name for name in FIELDS}
"""Each policy annotation, in its one documented spelling, with its policy key."""


KEYS_LISTED: Final = (f"; the policy annotations are, under {POLICY_ANNOTATION_PREFIX}: "
                      + ", ".join(name.replace("_", "-") for name in FIELDS))
"""What the log adds for an annotation under our prefix that no policy key is likely meant by."""


def _squashed(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()


_SQUASHED_FIELDS: Final = {_squashed(name): name for name in FIELDS}


def read_as(annotation: str) -> str | None:
    """The documented annotation that `annotation` is read as: itself, or for the policy file's key spelling under
    our prefix (`autoscaler.modelmesh.io/min_replicas`) the one with `-` for `_`. That spelling was read before
    one spelling was documented, and an upgrade must not drop it (a raised floor falling back to the file's)."""
    documented = annotation.replace("_", "-")
    return documented if documented in ANNOTATIONS else None


def near_miss(annotation: str) -> str | None:
    """The policy key that an annotation not read as a policy annotation (`read_as`) names all the same
    (`Min-Replicas`; `minReplicas`; any prefix but ours): whoever wrote one thinks it applies. None for the
    spellings read and for other tools' annotations."""
    if read_as(annotation) is not None:
        return None
    return _SQUASHED_FIELDS.get(_squashed(annotation[max(annotation.rfind("/"), annotation.rfind(".")) + 1:]))


def written_for_us(annotation: str) -> bool:
    """Whether the annotation is a policy annotation, or meant as one (`near_miss`, an unknown key under our
    prefix): those are applied or warned about, the others are other tools' business."""
    return annotation.startswith(POLICY_ANNOTATION_PREFIX) or near_miss(annotation) is not None


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
    """Per policy key, `annotation='text': why` of each annotation ignored for it (shown in /debug)."""
    unknown: tuple[str, ...]
    """`annotation='text': why` of each annotation under our prefix that names no policy key, with the key it is
    likely meant as: the log's words, shown in /debug too, where whoever wonders why it does not apply looks."""


Ignored = dict[str, list[tuple[Written, str]]]
"""Per policy key, each annotation written for it that is not used, and why."""


def apply_annotations(
    key: RuntimeKey, base: RuntimePolicy, annotations: tuple[tuple[str, str], ...], memory: AnnotationMemory,
    origin_below: Callable[[str], str],
) -> Annotated:
    """`base` with the runtime's policy annotations applied together (a pair such as min and max replicas is
    checked as a pair, not in name order against the file's other bound); an annotation that cannot be used
    (a bad value, or a near-miss spelling: `near_miss`) is ignored, its key keeping its last good annotation's
    value (`memory`), else `base`'s (from `origin_below`). One above the range any runtime needs is applied as
    written, warned about once per value (`above_range`): an older release applied it, and ignoring it after an
    upgrade lowered a runtime's value (`cache-pressure-cap=20`: 40 pods served, then 6, every cache full)."""
    fresh: dict[str, Written] = {}
    ignored: Ignored = {}
    warnings: dict[tuple[str, str], str] = {}
    unknown: list[str] = []
    unsuggested: set[tuple[str, str]] = set()
    names = {annotation for annotation, _ in annotations}
    for annotation, raw in annotations:
        _read_one(key, annotation, raw, names, fresh, ignored, warnings, unknown, unsuggested)
    chosen = dict(fresh)
    for name in ignored:
        if name not in chosen and name in memory.last_good:
            chosen[name] = memory.last_good[name]
    policy = _settle(base, chosen, fresh, memory, ignored)
    for name, entries in ignored.items():
        below = f"{name} {show_value(getattr(base, name))} ({origin_below(name)})"
        for written, why in entries:
            warnings[(written.annotation, written.raw)] = _ignored_text(
                key, name, written, why, chosen.get(name), fresh.get(name), getattr(policy, name), below)
    for name, written in chosen.items():
        if (said := above_range(name, getattr(policy, name))) is not None:
            line = f"runtime {key}: annotation {written.annotation}={echoed(written.raw)}: {said}"
            found = (written.annotation, written.raw)
            warnings[found] = f"{warnings[found]}; {line}" if found in warnings else line
    _warn_new(memory, warnings, unsuggested)
    memory.last_good = dict(chosen)  # a valid whole: what `_settle` kept
    return Annotated(
        policy,
        {name: f"annotation {w.annotation}"
         + ("" if fresh.get(name) == w else f" (its last good value, {echoed(w.raw)})") for name, w in chosen.items()},
        {name: "; ".join(f"{w.annotation}={echoed(w.raw)}: {why}" for w, why in entries)
         for name, entries in ignored.items()},
        tuple(unknown),
    )


def _read_one(key: RuntimeKey, annotation: str, raw: str, names: Collection[str], fresh: dict[str, Written],
              ignored: Ignored, warnings: dict[tuple[str, str], str], unknown: list[str],
              unsuggested: set[tuple[str, str]]) -> None:
    """Parse one annotation into `fresh` (or `ignored`, or `unknown` and `warnings` when it names no key of
    ours, and `unsuggested` too when no key is likely meant: `closest_field`). A near-miss spelling is ignored
    as a bad value is: keys have one spelling, as the file's have, and one applied in another spelling is one
    that a second annotation of the same key silently contradicts. The file's spelling under our prefix still
    applies (`read_as`), said once, unless the documented spelling is among `names` too."""
    documented = read_as(annotation)
    if documented is None:
        meant = near_miss(annotation)
        if meant is not None:
            ignored.setdefault(meant, []).append((Written(annotation, raw, None), (
                f"policy annotations are read only as documented, in lower case with '-' under "
                f"{POLICY_ANNOTATION_PREFIX!r}: write {POLICY_ANNOTATION_PREFIX}{meant.replace('_', '-')}")))
            return
        close = closest_field(annotation.removeprefix(POLICY_ANNOTATION_PREFIX).replace("-", "_"))
        hint = f" (did you mean {POLICY_ANNOTATION_PREFIX}{close.replace('_', '-')}?)" if close else ""
        unknown.append(f"{annotation}={echoed(raw)}: no such policy annotation{hint}")
        warnings[(annotation, raw)] = f"runtime {key}: ignoring annotation {unknown[-1]}"
        if close is None:
            unsuggested.add((annotation, raw))
        return
    name = ANNOTATIONS[documented]
    if documented != annotation:
        if documented in names:
            ignored.setdefault(name, []).append((Written(annotation, raw, None), (
                f"{documented} is written too, and the documented spelling applies over the file's")))
            return
        fix = f"{documented}={raw}" if _plain(raw) else f"{documented} with that value"
        warnings[(annotation, raw)] = (
            f"runtime {key}: annotation {annotation}={echoed(raw)} applies as {documented}, as the policy file's key "
            f"spelling read before: write {fix}, the documented spelling, instead")
    try:
        value = parse_field(name, raw)
    except RefusedValue as exc:  # the line shows the value beside the annotation: the rule alone, not it again
        ignored.setdefault(name, []).insert(0, (Written(annotation, raw, None), exc.rule))
        return
    except ValueError as exc:
        ignored.setdefault(name, []).insert(0, (Written(annotation, raw, None), str(exc)))
        return
    fresh[name] = Written(annotation, raw, value)


def _settle(base: RuntimePolicy, chosen: dict[str, Written], fresh: dict[str, Written], memory: AnnotationMemory,
            ignored: Ignored) -> RuntimePolicy:
    """`base` with `chosen` applied, leaving out (into `ignored`) what is out of range: a fresh annotation gives
    way to its last good value, a last good value to `base`'s. Both bounds written and crossed (`min-replicas=10
    max-replicas=5`, a swapped pair) are both ignored: neither is what was meant."""
    while True:
        policy = replace(base, **{n: w.value for n, w in chosen.items()})  # type: ignore[arg-type]
        problem = policy_problem(policy)
        if problem is None:
            return policy
        name = problem.name
        culprits = [name] if name in chosen else ["min_replicas"]  # max below min: the other annotated bound
        if name == "max_replicas" and "min_replicas" in chosen and "max_replicas" in chosen:
            culprits = [n for n in ("min_replicas", "max_replicas") if chosen[n] == fresh.get(n)] or culprits
        for culprit in culprits:
            if culprit not in chosen:  # cannot happen: `base` was checked when the book was made
                return base
            written = chosen.pop(culprit)
            if fresh.get(culprit) == written:
                # beside the value as written, the rule alone (`PolicyProblem`); a min_replicas refused for the
                # file's max_replicas is told the max's value, shown nowhere else
                why = problem.rule if culprit == name else problem.message
                ignored.setdefault(culprit, []).insert(0, (written, why))
                kept = memory.last_good.get(culprit)
                if kept is not None and kept.value != written.value:
                    chosen[culprit] = kept


def _ignored_text(key: RuntimeKey, name: str, written: Written, why: str, kept: Written | None,
                  fresh: Written | None, value: Value, below: str) -> str:
    """The warning for an ignored annotation: what was written and why, what value applies now, what to write;
    `below`: the key's value without the annotation, and where it comes from."""
    if kept is not None and kept == fresh:  # a near miss beside the annotation as spelt, which applies
        now = f"the runtime uses {name} {show_value(value)} from {kept.annotation}: remove {written.annotation}"
    elif kept is not None and kept.value == value:
        to_write = f"{read_as(kept.annotation)}={kept.raw if _plain(kept.raw) else echoed(kept.raw)}"
        now = (f"the runtime keeps {name} {show_value(value)}, the last good value of {kept.annotation}, until it "
               f"is fixed: write {to_write} to keep it, or remove the annotation for {below}")
    else:
        now = f"the runtime uses {below} meanwhile: fix the annotation, or remove it to keep that"
    return f"runtime {key}: ignoring annotation {written.annotation}={echoed(written.raw)}: {why}; {now}"


def _plain(raw: str) -> bool:
    """Whether a value can be shown as it is to write it (`key=value`): short and printable; else it is shown
    quoted, escaped and cut short (`echoed`)."""
    return len(raw) <= ECHO_LIMIT and raw.isprintable()


def _warn_new(memory: AnnotationMemory, warnings: dict[tuple[str, str], str],
              unsuggested: Collection[tuple[str, str]]) -> None:
    """Log the warnings not logged yet for the same annotation and text; forget those no longer written. The
    first of them for an annotation that no policy key is likely meant by (`unsuggested`) lists the policy
    annotations (`KEYS_LISTED`): once, not on each such annotation's line, nor in /debug's entry."""
    listed = False
    for written, message in warnings.items():
        if written not in memory.warned:
            if written in unsuggested and not listed:
                message, listed = message + KEYS_LISTED, True
            log.warning("%s", message)
    memory.warned = set(warnings)
