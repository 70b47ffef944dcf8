"""Scaling policies from the config file and from runtime annotations (docs/configuration.md, Policy).

Precedence, broadest first, each layer replacing single fields of the one before:

1. the built-in defaults of `RuntimePolicy`;
2. the base the caller passes (global CLI flags: `PolicyBook(defaults=RuntimePolicy(...))`);
3. the config file's `defaults:`;
4. the config file's `runtimes:` entry for the Deployment;
5. `autoscaler.modelmesh.io/<key-with-dashes>` annotations on the Deployment.

The file is the operator's deliberate setup, so anything wrong in it (unknown key, bad value, range) raises a
`ConfigError` naming the file and the key, and the adapter does not start. Annotations are edited per
Deployment by many hands, so a bad one is ignored with a warning (logged once per distinct value): a typo on
one Deployment must not stop the adapter serving every other runtime.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, fields, replace
from typing import Final

import yaml

from autoscaler.model import RuntimeKey
from autoscaler.names import POLICY_ANNOTATION_PREFIX, SERVINGRUNTIME_DEPLOYMENT_PREFIX
from autoscaler.policies.policy import RuntimePolicy

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """The config file (or a policy built by the caller) cannot be used; the message says where and why."""


_HINTS: Final = typing.get_type_hints(RuntimePolicy)
_FIELDS: Final = tuple(f.name for f in fields(RuntimePolicy))


def _kind(name: str) -> tuple[type, bool]:
    """(int or float, whether None is allowed) of a policy field, read from its annotation."""
    hint = _HINTS[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    base = next(a for a in args if a is not type(None))
    return base, type(None) in args


_NEAR_MISSES: Final = {
    spelling: name
    for name in _FIELDS
    for spelling in (name, name.replace("_", "-"), name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:]))
}
"""Annotation names (after the last `/` or `.`) that spell a policy key: under another prefix, a near miss."""


PolicyExplained = tuple[tuple[str, float | int | None, str], ...]
"""(policy key, value, where it came from) of the keys a layer above the built-in defaults set, in field order:
what /debug shows (`policy_document`). Only those: every runtime carries one in every refresh's snapshot, so a
key the flags or the file's `defaults:` leave at its built-in value (the shipped file restates them all) is
shown as built-in, which its value is."""

_BUILT_IN: Final = RuntimePolicy()
_BUILT_IN_ORIGIN: Final = "built-in"


def policy_document(explained: PolicyExplained | None) -> dict[str, dict[str, object]] | None:
    """Every policy key of a runtime: {key: {"value": ..., "from": ...}}, in field order (None: not known)."""
    if explained is None:
        return None
    document: dict[str, dict[str, object]] = {
        name: {"value": getattr(_BUILT_IN, name), "from": _BUILT_IN_ORIGIN} for name in _FIELDS}
    for name, value, origin in explained:
        document[name] = {"value": value, "from": origin}
    return document
_FLAGS: Final = {"skew_order": "--skew-order", "scale_down_tau_s": "--scale-down-tau",
                 "max_staleness_s": "--max-staleness (else 3 x --refresh-interval)", "min_coverage": "--min-coverage"}
"""The policy keys `serve` flags set for every runtime (`autoscaler.server.policy_book`)."""


def flag_origins(base: RuntimePolicy) -> dict[str, str]:
    """Where the keys of the flags' layer come from: the flag (or its AUTOSCALER_* variable: same value) where
    it differs from the built-in default (`max_staleness_s` also follows `--refresh-interval`)."""
    return {name: f"flag {_FLAGS.get(name, name)}" for name in _FIELDS
            if getattr(base, name) != getattr(_BUILT_IN, name)}


def _show(value: object) -> str:
    return "null" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


_NO_ANNOTATIONS: Final[Mapping[str, str]] = types.MappingProxyType({})

_NULL_WORDS: Final = frozenset({"", "null", "none", "~"})


def parse_field(name: str, raw: object) -> float | int | None:
    """Parse one policy value from YAML or an annotation string; ValueError says what was expected.

    Numbers may be given as strings ("120", "1e3": YAML 1.1 reads the latter as text). None, `null` or
    an empty string clears an optional field (`target_rps_per_pod`, `max_replicas`).
    """
    if name not in _HINTS:
        raise ValueError(f"unknown key {name!r}{_suggest(name)}")
    base, optional = _kind(name)
    if isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS:
        raw = None
    if raw is None:
        if optional:
            return None
        raise ValueError(f"{name} may not be null")
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ValueError(f"{name} must be a {'whole number' if base is int else 'number'}, got {raw!r}")
    try:
        if base is int:
            if isinstance(raw, float):
                raise ValueError
            return int(raw)
        value = float(raw)
    except ValueError:
        kind = "whole number" if base is int else "number"
        raise ValueError(f"{name} must be a {kind}, got {raw!r}{_unit_hint(name, raw)}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {raw!r}")
    return value


_RATIOS: Final = frozenset({"target_gpu_busy", "cache_full_ratio", "min_coverage"})
_SECONDS_PER: Final = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_WITH_UNIT: Final = re.compile(r"([0-9]*\.?[0-9]+)\s*(ms|s|sec|m|min|h)")


def _unit_hint(name: str, raw: object) -> str:
    """The fix for a number written with a unit, as people write them: `80%` for a ratio, `50ms` or `5m` for
    seconds. Said, not accepted: the key's unit is in its name and the docs, and one spelling reads the same
    in the file, the annotations and /debug."""
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if name in _RATIOS and text.endswith("%"):
        try:
            return f"; it is a ratio: write {float(text[:-1]) / 100:g} for {raw}"
        except ValueError:
            return "; it is a ratio: 0.8 is 80%"
    found = _WITH_UNIT.fullmatch(text)
    if name.endswith("_s") and found:
        return f"; it is in seconds: write {float(found[1]) * _SECONDS_PER[found[2]]:g} for {raw}"
    return ""


def _ratio_hint(name: str, value: object) -> str:
    """A ratio written as a percentage (`80` for 80%): say so, with the number to write."""
    if name in _RATIOS and isinstance(value, (int, float)) and 1 < value <= 100:
        return f" (a ratio: write {value / 100:g} for {value:g}%)"
    return ""


def _suggest(name: str) -> str:
    """A hint for a misspelt key: a field the name starts, else the closest spelling; for a runtime's name
    (a `runtimes:` entry written under `defaults:`), where it goes."""
    if name in ("namespace", "deployment"):
        return " (a runtime's namespace and deployment go in a 'runtimes:' entry, with its policy keys)"
    close = [f for f in _FIELDS if f.startswith(name)] or difflib.get_close_matches(name, _FIELDS, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _positive(x: float | None) -> bool:
    return x is not None and x > 0.0


def _ratio(x: float | None) -> bool:
    return x is not None and 0.0 < x <= 1.0


_CHECKS: Final[tuple[tuple[str, Callable[[RuntimePolicy], bool], str], ...]] = (
    ("skew_order", lambda p: 1.0 <= p.skew_order < math.inf, "must be >= 1"),
    ("target_gpu_busy", lambda p: _ratio(p.target_gpu_busy), "must be in (0, 1]"),
    (
        "target_rps_per_pod",
        lambda p: p.target_rps_per_pod is None or _positive(p.target_rps_per_pod),
        "must be > 0 or null",
    ),
    ("target_queue_delay_s", lambda p: _positive(p.target_queue_delay_s), "must be > 0 seconds"),
    ("queue_drain_s", lambda p: _positive(p.queue_drain_s), "must be > 0 seconds"),
    ("target_lru_age_s", lambda p: _positive(p.target_lru_age_s), "must be > 0 seconds"),
    ("cache_full_ratio", lambda p: _ratio(p.cache_full_ratio), "must be in (0, 1]"),
    ("cache_pressure_cap", lambda p: _positive(p.cache_pressure_cap), "must be > 0"),
    ("scale_down_tau_s", lambda p: p.scale_down_tau_s >= 0.0, "must be >= 0 seconds (0: fall at once)"),
    ("min_replicas", lambda p: p.min_replicas is None or p.min_replicas >= 1, "must be null or >= 1"),
    (
        "max_replicas",
        lambda p: p.max_replicas is None or p.max_replicas >= (p.min_replicas or 1),
        "must be null or >= min_replicas (and >= 1)",
    ),
    ("max_staleness_s", lambda p: _positive(p.max_staleness_s), "must be > 0 seconds"),
    ("min_coverage", lambda p: _ratio(p.min_coverage), "must be in (0, 1]"),
    ("warmup_grace_s", lambda p: p.warmup_grace_s is None or p.warmup_grace_s >= 0.0, "must be >= 0 seconds or null"),
    ("need_weight_requests", lambda p: p.need_weight_requests >= 0.0, "must be >= 0"),
    ("need_weight_gpu", lambda p: p.need_weight_gpu >= 0.0, "must be >= 0"),
    ("need_weight_cache", lambda p: p.need_weight_cache >= 0.0, "must be >= 0"),
)


def policy_problem(policy: RuntimePolicy) -> tuple[str, str] | None:
    """(field, message) of the first field out of range, or None (NaN and inf are out of every range)."""
    for name in _FIELDS:
        value = getattr(policy, name)
        if isinstance(value, float) and not math.isfinite(value):
            return name, f"{name} must be finite, got {value!r}"
    for name, ok, rule in _CHECKS:
        if not ok(policy):
            value = getattr(policy, name)
            hint = _ratio_hint(name, value)
            if name == "max_replicas":  # the rule names a second field: say what it holds
                hint = f"; min_replicas is {policy.min_replicas}"
            return name, f"{name} {rule}, got {value!r}{hint}"
    return None


def check_policy(policy: RuntimePolicy) -> None:
    """Raise ValueError naming the first field out of range (NaN and inf are out of every range)."""
    problem = policy_problem(policy)
    if problem is not None:
        raise ValueError(problem[1])


def apply_overrides(policy: RuntimePolicy, overrides: Mapping[str, object]) -> RuntimePolicy:
    """`policy` with the given fields replaced (parsed and range-checked); ValueError on the first bad one."""
    changes = {name: parse_field(name, raw) for name, raw in overrides.items()}
    result = replace(policy, **changes)  # type: ignore[arg-type]  # parse_field typed each value by field
    check_policy(result)
    return result


class PolicyBook:
    """The policy of every runtime: defaults, per-runtime entries, then the Deployment's annotations."""

    __slots__ = ("_cache", "_file", "_origins", "_unmatched", "defaults", "runtimes")

    def __init__(
        self,
        defaults: RuntimePolicy | None = None,
        runtimes: Mapping[RuntimeKey, RuntimePolicy] | None = None,
        origins: Mapping[RuntimeKey | None, Mapping[str, str]] | None = None,
    ) -> None:
        """`origins`: per layer (None: `defaults`, else a runtime's entry), where each key it sets came from, for
        /debug; without it, keys that differ from the built-in defaults come from the flags."""
        self.defaults = defaults if defaults is not None else RuntimePolicy()
        self.runtimes: dict[RuntimeKey, RuntimePolicy] = dict(runtimes or {})
        for where, policy in [("defaults", self.defaults), *((str(k), p) for k, p in self.runtimes.items())]:
            try:
                check_policy(policy)
            except ValueError as exc:
                raise ConfigError(f"policy for {where}: {exc}") from exc
        self._origins: dict[RuntimeKey | None, dict[str, str]] = {
            layer: dict(found) for layer, found in (origins or {None: flag_origins(self.defaults)}).items()}
        self._cache: dict[RuntimeKey, tuple[
            Mapping[str, str], tuple[tuple[str, str], ...], RuntimePolicy, PolicyExplained]] = {}
        """Per runtime, its annotations (all: the snapshot's own mapping, never changed once handed over;
        comparing two dicts is cheaper than picking ours out every refresh), its policy annotations, the
        policy they made and where each value came from: one entry per runtime that exists
        (`forget_all_but`), replaced when its annotations change."""
        self._unmatched: set[RuntimeKey] = set()
        """`runtimes:` entries already warned about as matching no runtime served."""
        self._file: _WatchedFile | None = None
        """The policy file the book was read from (`load_policy_book`), watched for edits while running."""

    def notice_file_change(self) -> None:
        """Called every refresh: warn once per new content when the policy file changed on disk (an edited
        ConfigMap reaches the mounted file within a minute or so). The file is read only at start
        (docs/configuration.md), so the warning says a restart applies it, or what would stop that restart."""
        watched = self._file
        if watched is None:
            return
        try:
            status = os.stat(watched.path)
            with open(watched.path, encoding="utf-8") as fh:
                if (status.st_ino, status.st_mtime_ns, status.st_size) == watched.status:
                    return
                watched.status = (status.st_ino, status.st_mtime_ns, status.st_size)
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            return  # a ConfigMap volume swaps its files in one rename; whatever is wrong shows at the restart
        if text == watched.warned:
            return
        watched.warned = None if text == watched.text else text
        if text == watched.text:
            return
        try:
            parse_policy_book(yaml.safe_load(text), watched.path, watched.base)
        except (yaml.YAMLError, ConfigError) as exc:
            problem = exc if isinstance(exc, ConfigError) else f"{watched.path}: not valid YAML: {exc}"
            log.warning("policy file %s changed on disk and the new version has a mistake: %s. The adapter keeps "
                        "the policy it started with, and would not start with this file: fix it before any "
                        "restart", watched.path, " ".join(str(problem).split()))
            return
        log.warning("policy file %s changed on disk; the adapter reads it only at start, so every runtime still "
                    "scales on the policy it started with: restart the adapter to apply it (kubectl -n "
                    "modelmesh-autoscaler rollout restart deployment/modelmesh-autoscaler)", watched.path)

    def explain(self, key: RuntimeKey) -> PolicyExplained | None:
        """The runtime's policy as last decided, for /debug (`policy_document`); None for a runtime not decided
        yet. The HPA's bounds, filled in later, show in the view's `bounds`."""
        cached = self._cache.get(key)
        return cached[3] if cached is not None else None

    def policy_for(self, key: RuntimeKey, annotations: Mapping[str, str] | None = None) -> RuntimePolicy:
        """The policy of one runtime; cheap to call every refresh (cached while its annotations stay the same).

        Annotations whose name ends in a policy key under another prefix (`autoscaling.modelmesh.io/...`,
        `max_replicas`) are not applied but warned about: whoever wrote one thinks it applies."""
        annotations = annotations or _NO_ANNOTATIONS
        cached = self._cache.get(key)
        if cached is not None and (cached[0] is annotations or cached[0] == annotations):  # a dict compare, in C
            return cached[2]
        ours = tuple(sorted(
            (k, v) for k, v in annotations.items()
            if k.startswith(POLICY_ANNOTATION_PREFIX) or k[max(k.rfind("/"), k.rfind(".")) + 1:] in _NEAR_MISSES
        ))
        if cached is not None and cached[1] == ours:  # another annotation changed (a rollout's revision)
            self._cache[key] = (annotations, ours, cached[2], cached[3])
            return cached[2]
        policy, applied = self._annotated(key, self.runtimes.get(key, self.defaults), ours)
        layer = self._origins.get(key if key in self.runtimes else None, {})
        broad = self._origins.get(None, {})
        explained = tuple(  # keys off their built-in value, and every key set for this runtime alone
            (f, getattr(policy, f), origin) for f in _FIELDS
            if (origin := applied.get(f) or layer.get(f)) is not None
            and (getattr(policy, f) != getattr(_BUILT_IN, f) or origin != broad.get(f)))
        if cached is not None and cached[2] != policy:
            changes = ", ".join(f"{f} {_show(getattr(cached[2], f))} -> {_show(getattr(policy, f))}"
                                for f in _FIELDS if getattr(cached[2], f) != getattr(policy, f))
            log.info("runtime %s: policy annotations changed: %s", key, changes)
        self._cache[key] = (annotations, ours, policy, explained)
        return policy

    @staticmethod
    def _annotated(
        key: RuntimeKey, base: RuntimePolicy, annotations: tuple[tuple[str, str], ...]
    ) -> tuple[RuntimePolicy, dict[str, str]]:
        """`base` with the runtime's policy annotations applied together (a pair such as min and max replicas
        is checked as a pair, not in name order against the file's other bound), and for each key applied,
        `annotation <name>`; each one that cannot be used is left out with a warning saying why."""
        parsed: dict[str, float | int | None] = {}
        written: dict[str, tuple[str, str]] = {}
        for annotation, raw in annotations:
            if not annotation.startswith(POLICY_ANNOTATION_PREFIX):
                name = _NEAR_MISSES[annotation[max(annotation.rfind("/"), annotation.rfind(".")) + 1:]]
                log.warning("runtime %s: annotation %s=%r is not read: policy annotations start with %r; "
                            "write %s%s", key, annotation, raw, POLICY_ANNOTATION_PREFIX,
                            POLICY_ANNOTATION_PREFIX, name.replace("_", "-"))
                continue
            name = annotation.removeprefix(POLICY_ANNOTATION_PREFIX).replace("-", "_")
            try:
                parsed[name] = parse_field(name, raw)
            except ValueError as exc:
                log.warning("runtime %s: ignoring annotation %s=%r: %s", key, annotation, raw, exc)
                continue
            if name in written:
                log.warning("runtime %s: annotations %s and %s both set %s; using %s=%r", key, written[name][0],
                            annotation, name, annotation, raw)
            written[name] = (annotation, raw)
        while True:
            policy = replace(base, **parsed)  # type: ignore[arg-type]  # parse_field typed each value by field
            problem = policy_problem(policy)
            if problem is None:
                return policy, {name: f"annotation {written[name][0]}" for name in parsed}
            field, message = problem
            # The field out of range, else (max_replicas below min_replicas) the other annotated bound.
            culprit = field if field in parsed else "min_replicas"
            if culprit not in parsed:  # cannot happen: `base` was checked when the book was made
                return base, {}
            annotation, raw = written[culprit]
            log.warning("runtime %s: ignoring annotation %s=%r: %s", key, annotation, raw, message)
            del parsed[culprit]

    def forget_all_but(self, keys: Collection[RuntimeKey]) -> None:
        """Drop the cached policies of runtimes not in `keys` (those the last refresh saw): runtimes come and go
        for days, and a policy kept for each one ever seen grows without end."""
        for gone in [key for key in self._cache if key not in keys]:
            del self._cache[gone]
        if keys and len(self._unmatched) < len(self.runtimes):
            self._warn_unmatched(keys)

    def _warn_unmatched(self, keys: Collection[RuntimeKey]) -> None:
        """Warn once about each `runtimes:` entry that names no runtime the adapter serves (with `--targets`;
        in Kubernetes, discovery says a listed Deployment is missing). `deployment: triton`, the ServingRuntime's
        name, is the usual slip: the runtime that exists then scales on the defaults."""
        for key in self.runtimes.keys() - keys - self._unmatched:
            self._unmatched.add(key)
            likely = RuntimeKey(key.namespace, SERVINGRUNTIME_DEPLOYMENT_PREFIX + key.deployment)
            hint = (f"; did you mean deployment: {likely.deployment} (ModelMesh names the Deployment "
                    f"{SERVINGRUNTIME_DEPLOYMENT_PREFIX}<ServingRuntime>)?" if likely in keys else "")
            log.warning("policy file entry runtimes: %s matches none of the %d runtimes served: its keys apply to "
                        "none until it appears%s", key, len(keys), hint)


def parse_policy_book(document: object, source: str, base: RuntimePolicy | None = None) -> PolicyBook:
    """Build a PolicyBook from a parsed config document; `source` names it in errors (the file path)."""
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"{source}: expected a mapping with 'defaults' and 'runtimes', got {document!r}")
    if document.get("kind") == "ConfigMap":  # manifests/base/config-map-policy.yaml, given as it is
        held = ", ".join(repr(k) for k in document.get("data") or {}) or "nothing"
        raise ConfigError(f"{source}: a Kubernetes ConfigMap, not the policy file it holds (its data: {held}); "
                          "give that file, e.g. the ConfigMap's data['policy.yaml'] saved on its own")
    unknown = sorted(set(document) - {"defaults", "runtimes"}, key=str)
    if unknown:
        where = (" (a policy key: put it under 'defaults:' for every runtime, or in a 'runtimes:' entry)"
                 if unknown[0] in _HINTS else "")
        raise ConfigError(f"{source}: unknown top-level key {unknown[0]!r} (expected 'defaults', 'runtimes'){where}")
    defaults = _layer(base or RuntimePolicy(), document.get("defaults"), source, "defaults")
    default_origins = flag_origins(base or RuntimePolicy())
    default_origins.update(_origins_of(document.get("defaults"), f"{source}: defaults"))
    origins: dict[RuntimeKey | None, dict[str, str]] = {None: default_origins}
    runtimes: dict[RuntimeKey, RuntimePolicy] = {}
    entries = document.get("runtimes") or []
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: runtimes: expected a list of {{namespace, deployment, ...}}")
    for i, entry in enumerate(entries):
        where = f"runtimes[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{source}: {where}: expected a mapping, got {entry!r}")
        overrides = dict(entry)
        namespace, deployment = overrides.pop("namespace", None), overrides.pop("deployment", None)
        for name, value in (("namespace", namespace), ("deployment", deployment)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{source}: {where}: {name} must be a non-empty string, got {value!r}")
        key = RuntimeKey(str(namespace), str(deployment))
        if key in runtimes:
            raise ConfigError(f"{source}: {where}: runtime {key} is listed twice")
        runtimes[key] = _layer(defaults, overrides, source, f"{where} ({key})")
        origins[key] = {**default_origins, **_origins_of(overrides, f"{source}: {where}")}
    return PolicyBook(defaults=defaults, runtimes=runtimes, origins=origins)


def _origins_of(overrides: object, origin: str) -> dict[str, str]:
    return {str(name): origin for name in overrides} if isinstance(overrides, Mapping) else {}


def _layer(policy: RuntimePolicy, overrides: object, source: str, where: str) -> RuntimePolicy:
    if overrides is None:
        return policy
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{source}: {where}: expected a mapping of policy keys, got {overrides!r}")
    try:
        return apply_overrides(policy, {str(k): v for k, v in overrides.items()})
    except ValueError as exc:
        raise ConfigError(f"{source}: {where}: {exc}") from exc


def _file_inside(directory: str) -> str:
    """Which file of a directory to give instead: a mounted ConfigMap holds one file per key (and `..data`)."""
    try:
        names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:
        names = []
    yaml_files = [n for n in names if n.endswith((".yaml", ".yml"))] or names
    if len(yaml_files) == 1:
        return f"give the file in it: --config {os.path.join(directory, yaml_files[0])}"
    return f"give one file in it ({', '.join(yaml_files) or 'it holds none'}), e.g. --config {directory}/policy.yaml"


def load_policy_book(
    path: str | os.PathLike[str], base: RuntimePolicy | None = None, *, announce: bool = True
) -> PolicyBook:
    """Read the YAML config file (`defaults:` and `runtimes:`, docs/configuration.md, Policy).

    `announce`: log what a user may not expect of a file that loads (empty; a flag its `defaults:` replace);
    off for the start-up check, which only asks whether it loads."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            status = os.fstat(fh.fileno())
            text = fh.read()
        document = yaml.safe_load(text)
    except IsADirectoryError as exc:
        raise ConfigError(f"{source}: cannot read config file: it is a directory (a mounted ConfigMap?); "
                          f"{_file_inside(source)}") from exc
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read config file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc.reason})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    book = parse_policy_book(document, source, base)
    if announce:
        _announce(document, source, base)
    book._file = _WatchedFile(source, text, base, (status.st_ino, status.st_mtime_ns, status.st_size))
    return book


def _announce(document: object, source: str, base: RuntimePolicy | None) -> None:
    """An empty file, and flags the file's `defaults:` replace (the documented order, which surprises whoever
    passes `--skew-order 3` with the shipped file that restates `skew_order: 2`)."""
    if document is None:
        log.info("policy file %s is empty: every runtime scales on the built-in defaults and the flags", source)
        return
    defaults = document.get("defaults") if isinstance(document, Mapping) else None
    if base is None or not isinstance(defaults, Mapping):
        return
    flags = flag_origins(base)
    for name, raw in defaults.items():
        if name in flags and getattr(base, name) != parse_field(name, raw):
            log.warning("%s gives %s=%s, but %s sets defaults: {%s: %s}, which wins (the policy file comes after "
                        "the flags, docs/configuration.md, Policy); remove the key from the file for the flag to apply",
                        flags[name], name, _show(getattr(base, name)), source, name, raw)


@dataclass(slots=True)
class _WatchedFile:
    """The policy file as read at start, and what `PolicyBook.notice_file_change` last saw of it."""

    path: str
    text: str
    base: RuntimePolicy | None
    status: tuple[int, int, int]
    """(inode, mtime, size) last seen: the file is read again only when one of them changes."""
    warned: str | None = None
    """The content last warned about (None: none since the file was last as read at start)."""
