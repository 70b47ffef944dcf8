"""Where each key of a runtime's policy came from (a built-in default, a flag, the file, an annotation): what
/debug shows, so that a user sees why a runtime scales as it does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import FIELDS, above_range

PolicyEntry = tuple[str, float | int | None, str, str | None]
PolicyExplained = tuple[tuple[PolicyEntry, ...], tuple[str, ...]]
"""The (policy key, value, where it came from, what written for it is ignored and why, or None) of the keys a layer
above the built-in defaults set, in field order: what /debug shows (`policy_document`). Only those: every
runtime carries one in every refresh's snapshot, so a key the flags and the file's `defaults:` leave at its
built-in value (the shipped file restates them all) is shown as built-in, which its value is (`deciding`); and
any key with an ignored annotation, so that /debug answers "why is my annotation not applied"; then each
annotation under our prefix that names no policy key, with why (`Annotated.unknown`: `()` for nearly every
runtime, one tuple shared by all)."""

BUILT_IN: Final = RuntimePolicy()
BUILT_IN_ORIGIN: Final = "built-in"


def policy_document(explained: PolicyExplained | None) -> dict[str, Any] | None:
    """Every policy key of a runtime: {key: {"value": ..., "from": ...}}, in field order (None: not known), with
    `ignored` where an annotation written for the key is not used (`annotation='text': why`), and `warning` where
    the value is above the range any runtime needs and used as given (`above_range`). Only keys: a client
    walks its entries as `{value, from}` objects (the annotations that name no key are `unknown_annotations`)."""
    if explained is None:
        return None
    entries, _unknown = explained
    document: dict[str, Any] = {
        name: {"value": getattr(BUILT_IN, name), "from": BUILT_IN_ORIGIN} for name in FIELDS}
    for name, value, origin, ignored in entries:
        document[name] = {"value": value, "from": origin}
        if ignored is not None:
            document[name]["ignored"] = ignored
        if (said := above_range(name, value)) is not None:  # used as given: what it does, as the log says
            document[name]["warning"] = said
    return document


def unknown_annotations(explained: PolicyExplained | None) -> list[str]:
    """The annotations under our prefix that name no policy key, as the log says them (empty where there are
    none, or the policy is not known): /debug's `unknown_annotations`, beside `policy`, so that it shows every
    annotation written for us that does not apply."""
    return list(explained[1]) if explained is not None else []


_FLAGS: Final = {"skew_order": "--skew-order", "scale_down_tau_s": "--scale-down-tau",
                 "max_staleness_s": "--max-staleness (else 3 x --refresh-interval)", "min_coverage": "--min-coverage"}
"""The policy keys `serve` flags set for every runtime (`autoscaler.server.policy_book`)."""
FLAG_DESTS: Final = {name: flag.split()[0].removeprefix("--").replace("-", "_") for name, flag in _FLAGS.items()}
"""Each of those keys with its flag's dest, as `ServeSettings.given_by` names a setting given."""


_DERIVED: Final = {"max_staleness_s": "3 x --refresh-interval (flag or AUTOSCALER_REFRESH_INTERVAL)"}
"""Where a key the flags' layer sets comes from when no flag or variable of its own set it."""


def flag_origins(base: RuntimePolicy, given_by: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where the keys of the flags' layer come from, where they differ from the built-in default: as `given_by`
    names what the user wrote (`variable AUTOSCALER_SCALE_DOWN_TAU`: a pod spec's variable is not its flag), a
    `max_staleness_s` no one gave as following `--refresh-interval` (it named `--max-staleness`, which appeared
    nowhere); without `given_by`, the flag."""
    given, derived = (given_by, _DERIVED) if given_by is not None else ({}, {})
    return {name: given.get(name) or derived.get(name) or f"flag {_FLAGS.get(name, name)}" for name in FIELDS
            if getattr(base, name) != getattr(BUILT_IN, name)}


def deciding(written: Mapping[str, str], layer: RuntimePolicy, below: RuntimePolicy) -> dict[str, str]:
    """Where the keys a broad layer wrote (`written`: the file's `defaults:`) come from, leaving out those that
    restate the built-in value over a layer (`below`: the flags) that left it there too: the built-in decided
    them. A key set back to the built-in value over a flag's other value is the layer's: shown as built-in, the
    user could not see why the flag did not apply."""
    return {name: origin for name, origin in written.items()
            if getattr(layer, name) != getattr(BUILT_IN, name)
            or getattr(below, name) != getattr(BUILT_IN, name)}
