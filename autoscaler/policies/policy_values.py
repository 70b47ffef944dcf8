"""One policy value: read from the config file or an annotation, range-checked, and, when it is written as people
often write it (`80%`, `50ms`, a misspelt key), refused with the value to write instead."""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Final, NamedTuple

from autoscaler.policies.policy import PROPOSAL_LIMIT, RuntimePolicy
from exporter.recency_horizon_range import MODEL_RECENCY_HORIZON_RANGE_S
from exporter.signal_ceilings import CEILINGS

HINTS: Final = typing.get_type_hints(RuntimePolicy)
FIELDS: Final = tuple(f.name for f in fields(RuntimePolicy))


def _kind(name: str) -> tuple[type, bool]:
    """(int or float, whether None is allowed) of a policy field, read from its annotation."""
    hint = HINTS[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    base = next(a for a in args if a is not type(None))
    return base, type(None) in args


def show_value(value: object) -> str:
    """A policy value in a log line (a change, the value a layer replaced) as it was written: `:g` logged an
    annotation's 1000000 as `1e+06` (`number_as_read`)."""
    return "null" if value is None else number_as_read(value) if isinstance(value, float) else str(value)


def number_as_read(value: float) -> str:
    """A float as the file had it, for a refusal or a log line: every digit (`1000001`, where `:g` says `1e+06`,
    past the bound it is refused for), without the `.0` a whole number gains as a float (`got 1000001.0` was a
    number the file never said), and an exponent as `:g` writes it (`1e+300`)."""
    return repr(value).removesuffix(".0")


ECHO_LIMIT: Final = 100
"""The most of a value as written that a log line or /debug shows: annotations are written by whoever controls
a Deployment, and a 100 KB one was logged whole, twice a line."""


def echoed(raw: object) -> str:
    """A value as written, for a log line or /debug: quoted (`repr`: a line break shows as `\\n`, never as a
    line of its own), and when longer than `ECHO_LIMIT` characters shown (escapes included), its beginning and
    `... (N characters)`."""
    text = raw if isinstance(raw, str) else repr(raw)
    shown = 0
    for kept, character in enumerate(text):
        shown += 1 if character.isprintable() else len(repr(character)) - 2
        if shown > ECHO_LIMIT:
            head = text[:kept]
            return f"{head!r}... ({len(text):,} characters)" if isinstance(raw, str) else (
                f"{head}... ({len(text):,} characters)")
    return repr(raw)


class RefusedValue(ValueError):
    """A value that is not one the key takes: the message shows it (`echoed`) between what the key takes and
    the fix (`hint`); `rule` says both without it, for a line that shows it already (an annotation's warning,
    beside the annotation's name): a long value was shown twice there."""

    def __init__(self, rule: str, raw: object, hint: str = "") -> None:
        super().__init__(f"{rule}, got {echoed(raw)}{hint}")
        self.rule = rule + hint


_NULL_WORDS: Final = frozenset({"", "null", "none", "~"})


def parse_field(name: str, raw: object) -> float | int | None:
    """Parse one policy value from YAML or an annotation string; ValueError says what was expected.

    Numbers may be given as strings ("120", "1e3": YAML 1.1 reads the latter as text). None, `null` or
    an empty string clears an optional field (`target_rps_per_pod`, `max_replicas`).
    """
    if name not in HINTS:
        raise ValueError(f"unknown key {name!r}{_suggest(name)}")
    base, optional = _kind(name)
    if isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS:
        raw = None
    if raw is None:
        if optional:
            return None
        raise ValueError(f"{name} may not be null")
    kind = "whole number" if base is int else "number"
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise RefusedValue(f"{name} must be a {kind}", raw)
    try:
        if isinstance(raw, str) and not raw.strip().isascii():  # int and float read any script's digits ('١٢'
            raise ValueError  # as 12) and strip any whitespace (a no-break space pasted from a page), as here
        if base is int:
            if isinstance(raw, float):
                raise ValueError
            return int(raw)
        value = float(raw)
    except ValueError:
        raise RefusedValue(f"{name} must be a {kind}", raw, _unit_hint(name, raw)) from None
    if not math.isfinite(value):
        raise RefusedValue(f"{name} must be finite", raw)
    return value


_RATIOS: Final = frozenset({"target_gpu_busy", "cache_full_ratio", "min_coverage"})
_SECONDS_PER: Final = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_WITH_UNIT: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*(ms|s|sec|m|min|h)")
"""A number and a unit of time. One way to read each text: `[0-9]*\\.?[0-9]+` tried every split of a run of
digits between its two parts, so a 256 KiB annotation of digits held the refresh for about 20 minutes."""


def _unit_hint(name: str, raw: object) -> str:
    """The fix for a number written with a unit, as people write them: `80%` for a ratio, `50ms` or `5m` for
    seconds. Said, not accepted: the key's unit is in its name and the docs, and one spelling reads the same
    in the file, the annotations and /debug. The value is named by its number as read (`80%`), never as
    written: that may be long, and is shown once already (`echoed`)."""
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if name in _RATIOS and text.endswith("%"):
        try:
            return f"; it is a ratio: write {float(text[:-1]) / 100:g} for {float(text[:-1]):.15g}%"
        except ValueError:
            return "; it is a ratio: 0.8 is 80%"
    found = _WITH_UNIT.fullmatch(text) if name.endswith("_s") else None
    if found:
        number = float(found[1])
        return f"; it is in seconds: write {number * _SECONDS_PER[found[2]]:g} for {number:.15g}{found[2]}"
    return ""


def _ratio_hint(name: str, value: object) -> str:
    """A ratio written as a percentage (`80` for 80%): say so, with the number to write. Only for a whole number
    of percent from 2 up: a 1.5 or a 1.2 is a ratio a little over 1, and "write 0.015" fixed it to what nobody
    meant."""
    if name in _RATIOS and isinstance(value, (int, float)) and 2 <= value <= 100 and float(value).is_integer():
        return f" (a ratio: write {value / 100:g} for {value:g}%)"
    return ""


def closest_name(name: str, known: Sequence[str]) -> str | None:
    """The name in `known` a misspelt `name` most likely means: the one name that fits it (that it starts, as
    `skew` starts `skew_order`, or that has every word of it, as `scale_down_tau_s` has `tau`), else, where none
    fits, the closest spelling. Where several fit (`min`: `min_replicas` and `min_coverage`) there is no guess:
    a hint that names the wrong one is worse than none. One rule for every key a user writes in a file (the
    policy file's, the targets file's) or an annotation, so that the hints read the same everywhere."""
    words = set(_WORD_BREAK.split(name.lower())) - {""}
    fitting = [k for k in known if k.startswith(name) or (words and words <= set(_WORD_BREAK.split(k.lower())))]
    if fitting:
        return fitting[0] if len(fitting) == 1 else None
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return close[0] if close else None


_WORD_BREAK: Final = re.compile(r"[-_.]")
"""What separates the words of a key (`scale_down_tau_s`, `min-replicas`, `exporter.port`)."""


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for a misspelt key (`closest_name`), or nothing: the hint every file's unknown key
    gets."""
    close = closest_name(name, known)
    return f" (did you mean {close!r}?)" if close else ""


def closest_field(name: str) -> str | None:
    """The policy key a misspelt `name` most likely means (`closest_name` over the policy keys)."""
    return closest_name(name, FIELDS)


def _suggest(name: str) -> str:
    """A hint for a misspelt key (`did_you_mean`); for a runtime's name (a `runtimes:` entry written under
    `defaults:`), where it goes."""
    if name in ("namespace", "deployment"):
        return " (a runtime's namespace and deployment go in a 'runtimes:' entry, with its policy keys)"
    return did_you_mean(name, FIELDS)


MAX_STALENESS_RANGE_S: Final = (0.1, 10_800.0)
"""The `max_staleness_s` taken (policy key, annotation, `--max-staleness`). Up to three of the longest refresh interval
(3600 s), the default that follows `--refresh-interval`: 1e12 kept a pod whose exporter died counted, fresh, with its
last values for ever, and put off the /healthz stall check as long. From a tenth of a second, the shortest interval
of a refresh and of an exporter's reads; under the exporters' `--modelmesh-interval` (5 s) plus a refresh's reads,
signals turn stale between two reads: see docs/configuration.md."""


SCALE_DOWN_TAU_RANGE_S: Final = (0.0, 86_400.0)
"""The `scale_down_tau_s` taken (policy key, annotation, `--scale-down-tau`). Up to a day: 1e300 was taken and the
served values never fell, so the HPA never scaled down, with nothing said; a fall of one pod takes the time constant
times ln 10, 2.3 days at a day's, already far beyond any scale-down a platform waits for (the HPA's own
stabilization window is at most an hour). 0 serves falls at once."""


WARMUP_GRACE_RANGE_S: Final = (0.0, 10_800.0)
"""The `warmup_grace_s` taken (policy key, annotation). Up to three hours, the most `max_staleness_s` takes, which a
null grace follows: 1e300 was taken and the warm-up log line printed a 301-digit number of seconds, and a runtime
the adapter had no memory of (after every restart or rolling update) held its replicas until every Ready pod was
fresh, without end. A grace longer than the longest staleness waits for a pod that counts as missing already."""

TARGET_LRU_AGE_RANGE_S: Final = MODEL_RECENCY_HORIZON_RANGE_S
"""The `target_lru_age_s` taken (over 0). Up to a week, the longest `--model-recency-horizon` an exporter takes (the
one constant, `exporter.recency_horizon_range`): the per-model use the cache need counts is kept only that long, so
a longer age held the cache term (may rise, never fall) for good, and `simulate --config` with 1e300 stopped with an
OverflowError traceback."""

QUEUE_DRAIN_RANGE_S: Final = (0.0, 3600.0)
"""The `queue_drain_s` taken (over 0). The queue term asks for the excess backlog over this time in pods, so at an
hour a pod is asked for only once an hour of queued work waits beyond the target: no request waits that long for
its answer (clients and ingresses give up within minutes), so past it the term never proposes; 1e300 was taken and
turned it off without a word. An hour is also the longest scale-down window an HPA takes."""

TARGET_QUEUE_DELAY_RANGE_S: Final = (0.0, 600.0)
"""The `target_queue_delay_s` taken (over 0; the default is 50 ms). Up to ten minutes: a pod counts as saturated
only once its mean queue wait passes it, and far before ten minutes a request's client or the ingress in front
(30 to 60 s as shipped by most) has given up, so past it the queue term never proposes while requests still fail;
1e300 was taken and turned it off without a word."""

NEED_WEIGHT_RANGE: Final = (0.0, 1000.0)
"""The `need_weight_*` taken. The weights are divided by their sum, so only their ratios count: at 1000 against
1, the other term moves a pod's need by under a thousandth, a hundredth of one of the ten deletion-cost buckets,
so no ranking needs more (0 leaves a term out). 1e308 each was taken: the sum overflowed to infinity, every
pod's need read 0 and every deletion cost 0, so the ReplicaSet removed any pod, with nothing said."""


TARGET_RPS_PER_POD_RANGE: Final = (0.0, CEILINGS["requests_per_second"].limit)
"""The `target_rps_per_pod` any runtime needs (over 0, or null). Up to a million requests a second, the most a
pod's reading can be (`exporter.signal_ceilings`: a higher one is refused as garbage): the request term asks for
the counted pods' load over this target in pods, so past it no load the adapter takes for real asks for as many
pods as it counts (1e300: one pod whatever the load, six pods serving 500 req/s each). A larger value is used as
given, with a WARNING saying so (`above_range`): releases up to a3a0b238 took any, and refusing it stopped every
new replica of an upgrade (a policy file) or served the file's value instead (an annotation); null is the way to
leave requests out."""

CACHE_PRESSURE_CAP_RANGE: Final = (0.0, 10.0)
"""The `cache_pressure_cap` any runtime needs (over 0; the default is 1.2). The cache-pressure term asks for the
Ready pods times the pressure (`target_lru_age_s` over the oldest copy's age), at most this cap, and where pods
report per-model use at most this cap times the pods the copies in use fill: the cap is what keeps the term from
running away. Up to ten: one refresh may ask for ten times the pods (the HPA's own default adds at most twice as
many a period), pods whose caches would then hold nine tenths copies nobody used within `target_lru_age_s`. A
larger value is used as given, with a WARNING (`above_range`): releases up to a3a0b238 took any (a runtime
annotated 20 served 40 pods; ignoring it served 6 while every cache was full), and 1e300, which removes the cap
(six full pods whose oldest copy was used a second ago ask for 3,600), is said, not done without a word."""


def _rps_effect(value: float) -> str:
    return (f"the request term asks for at most {TARGET_RPS_PER_POD_RANGE[1] / value:.3g} x the pods it counts "
            f"whatever the load (no pod reads more than {TARGET_RPS_PER_POD_RANGE[1]:,.0f} requests/s)")


def _cap_effect(value: float) -> str:
    shown = number_as_read(value)
    return (f"the cache term may ask for up to {shown} x the Ready pods in one refresh, and {shown} x the pods "
            f"the copies in use fill")


_ABOVE_RANGE: Final[dict[str, tuple[float, str, Callable[[float], str]]]] = {
    "target_rps_per_pod": (TARGET_RPS_PER_POD_RANGE[1], f"{TARGET_RPS_PER_POD_RANGE[1]:,.0f}", _rps_effect),
    "cache_pressure_cap": (CACHE_PRESSURE_CAP_RANGE[1], f"{CACHE_PRESSURE_CAP_RANGE[1]:g}", _cap_effect),
}
"""The keys whose values above the range any runtime needs are used as given, with a warning: per key, the
range's top, as said, and what such a value does. Older releases took them, and an upgrade must not stop on a
file they started with, nor lower a runtime's value by ignoring its annotation."""


def above_range(name: str, value: object) -> str | None:
    """Why a value the key takes is more than any runtime needs (`cache_pressure_cap 20: above the range any
    runtime needs, used as given: ...; at most 10 is meant`), for the log and /debug; None for one within it."""
    bound = _ABOVE_RANGE.get(name)
    if bound is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= bound[0]:
        return None
    _, shown, effect = bound
    return (f"{name} {number_as_read(float(value))}: above the range any runtime needs, used as given: "
            f"{effect(float(value))}; at most {shown} is meant")


def _ratio(x: float | None) -> bool:
    return x is not None and 0.0 < x <= 1.0


_Check = tuple[str, Callable[[RuntimePolicy], bool], str]


def _over_zero_seconds(name: str, high: float) -> _Check:
    """The check of a duration over 0 and at most `high` (a key whose 0 means nothing: no time to drain in, no
    age to keep): a test of the field `name`, and the rule in the words the other ranges use."""
    def within(policy: RuntimePolicy) -> bool:
        value = getattr(policy, name)
        return value is not None and 0.0 < value <= high

    return name, within, f"must be > 0 and at most {high:g} seconds"


def _need_weight(name: str) -> _Check:
    """The check of a need weight, within `NEED_WEIGHT_RANGE`."""
    low, high = NEED_WEIGHT_RANGE

    def within(policy: RuntimePolicy) -> bool:
        return bool(low <= getattr(policy, name) <= high)

    return name, within, f"must be {low:g} to {high:g}"


_CHECKS: Final[tuple[_Check, ...]] = (
    ("skew_order", lambda p: 1.0 <= p.skew_order < math.inf, "must be >= 1"),
    ("target_gpu_busy", lambda p: _ratio(p.target_gpu_busy), "must be in (0, 1]"),
    ("target_rps_per_pod", lambda p: p.target_rps_per_pod is None or p.target_rps_per_pod > 0.0, "must be > 0 or null"),
    _over_zero_seconds("target_queue_delay_s", TARGET_QUEUE_DELAY_RANGE_S[1]),
    _over_zero_seconds("queue_drain_s", QUEUE_DRAIN_RANGE_S[1]),
    _over_zero_seconds("target_lru_age_s", TARGET_LRU_AGE_RANGE_S[1]),
    ("cache_full_ratio", lambda p: _ratio(p.cache_full_ratio), "must be in (0, 1]"),
    ("cache_pressure_cap", lambda p: p.cache_pressure_cap > 0.0, "must be > 0"),
    (
        "scale_down_tau_s",
        lambda p: SCALE_DOWN_TAU_RANGE_S[0] <= p.scale_down_tau_s <= SCALE_DOWN_TAU_RANGE_S[1],
        f"must be {SCALE_DOWN_TAU_RANGE_S[0]:g} to {SCALE_DOWN_TAU_RANGE_S[1]:g} seconds (0: fall at once)",
    ),
    # At most what the adapter ever serves: a larger floor was served as 1,000,000 without a word.
    (
        "min_replicas",
        lambda p: p.min_replicas is None or 1 <= p.min_replicas <= PROPOSAL_LIMIT,
        f"must be null or from 1 to {PROPOSAL_LIMIT:,} (the most the adapter serves)",
    ),
    (
        "max_replicas",
        lambda p: p.max_replicas is None or (p.min_replicas or 1) <= p.max_replicas <= PROPOSAL_LIMIT,
        f"must be null or >= min_replicas (and >= 1), at most {PROPOSAL_LIMIT:,}",
    ),
    (
        "max_staleness_s",
        lambda p: MAX_STALENESS_RANGE_S[0] <= p.max_staleness_s <= MAX_STALENESS_RANGE_S[1],
        f"must be {MAX_STALENESS_RANGE_S[0]:g} to {MAX_STALENESS_RANGE_S[1]:g} seconds",
    ),
    ("min_coverage", lambda p: _ratio(p.min_coverage), "must be in (0, 1]"),
    (
        "warmup_grace_s",
        lambda p: p.warmup_grace_s is None or WARMUP_GRACE_RANGE_S[0] <= p.warmup_grace_s <= WARMUP_GRACE_RANGE_S[1],
        f"must be {WARMUP_GRACE_RANGE_S[0]:g} to {WARMUP_GRACE_RANGE_S[1]:g} seconds or null",
    ),
    _need_weight("need_weight_requests"),
    _need_weight("need_weight_gpu"),
    _need_weight("need_weight_cache"),
    _need_weight("need_weight_unique"),
)


class PolicyProblem(NamedTuple):
    """The first field of a policy out of range, and why: `message` with the value, for the policy file's refusal;
    `rule` without it, for an annotation's warning, which shows the value as written beside the annotation's name
    (with the value as read too, `'1e300': ... got 1e+300`, it read as two values)."""

    name: str
    message: str
    rule: str


def policy_problem(policy: RuntimePolicy) -> PolicyProblem | None:
    """The first field out of range, or None (NaN and inf are out of every range)."""
    for name in FIELDS:
        value = getattr(policy, name)
        if isinstance(value, float) and not math.isfinite(value):
            return PolicyProblem(name, f"{name} must be finite, got {value!r}", f"{name} must be finite")
    for name, ok, rule in _CHECKS:
        if not ok(policy):
            value = getattr(policy, name)
            hint = _ratio_hint(name, value)
            if name == "max_replicas":  # the rule names a second field: say what it holds
                hint = f"; min_replicas is {show_value(policy.min_replicas)}"
            shown = (show_value(value) if value is None else number_as_read(value) if isinstance(value, float)
                     else echoed(value))
            return PolicyProblem(name, f"{name} {rule}, got {shown}{hint}", f"{name} {rule}{hint}")
    return None


def check_policy(policy: RuntimePolicy) -> None:
    """Raise ValueError naming the first field out of range (NaN and inf are out of every range)."""
    problem = policy_problem(policy)
    if problem is not None:
        raise ValueError(problem.message)


def apply_overrides(policy: RuntimePolicy, overrides: Mapping[str, object]) -> RuntimePolicy:
    """`policy` with the given fields replaced (parsed and range-checked); ValueError on the first bad one."""
    changes = {name: parse_field(name, raw) for name, raw in overrides.items()}
    result = replace(policy, **changes)  # type: ignore[arg-type]  # parse_field typed each value by field
    check_policy(result)
    return result
