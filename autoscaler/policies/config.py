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

import logging
import types
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Final

from autoscaler.kube_names import runtime_key_problem
from autoscaler.model import RuntimeKey
from autoscaler.names import SERVINGRUNTIME_DEPLOYMENT_PREFIX
from autoscaler.policies.policy import RuntimePolicy, hpa_contradiction, with_hpa_bounds
from autoscaler.policies.policy_annotations import AnnotationMemory, apply_annotations, written_for_us
from autoscaler.policies.policy_origins import BUILT_IN, BUILT_IN_ORIGIN, PolicyExplained, deciding, flag_origins
from autoscaler.policies.policy_values import (
    FIELDS,
    HINTS,
    apply_overrides,
    check_policy,
    did_you_mean,
    show_value,
)

if TYPE_CHECKING:
    from autoscaler.policies.config_file import WatchedFile

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """The config file (or a policy built by the caller) cannot be used; the message says where and why."""


_NO_ANNOTATIONS: Final[Mapping[str, str]] = types.MappingProxyType({})


class PolicyBook:
    """The policy of every runtime: defaults, per-runtime entries, then the Deployment's annotations."""

    __slots__ = ("_cache", "_hpa_notes", "_memory", "_origins", "_unmatched", "defaults", "runtimes", "source_file")

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
        (`forget`), replaced when its annotations change."""
        self._memory: dict[RuntimeKey, AnnotationMemory] = {}
        """Per runtime, its annotations' last good values and the mistakes warned about (`apply_annotations`)."""
        self._hpa_notes: dict[RuntimeKey, tuple[str, str]] = {}
        """Per runtime whose configured bound contradicts its HPA's other bound: (the HPA's bound's policy key,
        why it is not applied), warned once and shown in /debug (`with_hpa_bounds`)."""
        self._unmatched: set[RuntimeKey] = set()
        """`runtimes:` entries already warned about as matching no runtime served."""
        self.source_file: WatchedFile | None = None
        """The policy file the book was read from (`load_policy_book`), watched for edits while running."""

    def notice_file_change(self) -> None:
        """Called every refresh: warn once per new content when the policy file changed on disk (an edited
        ConfigMap reaches the mounted file within a minute or so); the file is read only at start."""
        if self.source_file is not None:
            self.source_file.notice_change()

    def explain(self, key: RuntimeKey) -> PolicyExplained | None:
        """The runtime's policy as last decided, for /debug (`policy_document`); None for a runtime not decided
        yet. The HPA's bounds, filled in later, show in the view's `bounds`."""
        cached = self._cache.get(key)
        if cached is None:
            return None
        note = self._hpa_notes.get(key)
        if note is None:
            return cached[3]
        name, why = note
        entries, unknown = cached[3]
        entry = next((e for e in entries if e[0] == name), (name, getattr(BUILT_IN, name), BUILT_IN_ORIGIN, None))
        shown = (*entry[:3], why if entry[3] is None else f"{entry[3]}; {why}")
        return tuple(sorted([e for e in entries if e[0] != name] + [shown], key=lambda e: FIELDS.index(e[0]))), unknown

    def with_hpa_bounds(self, key: RuntimeKey, policy: RuntimePolicy, hpa_min: int | None,
                        hpa_max: int | None) -> RuntimePolicy:
        """`policy.with_hpa_bounds`, warning once (and noting for /debug) where a bound the config sets contradicts
        the HPA's other one: `max-replicas=2` under `minReplicas: 3` showed bounds [3, 2] and was said nowhere."""
        found = hpa_contradiction(policy, hpa_min, hpa_max)
        if found is None:
            self._hpa_notes.pop(key, None)
            return with_hpa_bounds(policy, hpa_min, hpa_max)
        name, hpa_field = found
        value, hpa_value = getattr(policy, name), hpa_min if hpa_field == "minReplicas" else hpa_max
        cached = self._cache.get(key)
        origin = next((e[2] for e in cached[3][0] if e[0] == name), "the flags") if cached is not None else "the flags"
        other, relation = ("min_replicas", "above") if name == "max_replicas" else ("max_replicas", "below")
        why = (f"the HPA's {hpa_field} {hpa_value}: {relation} {name} {value} ({origin}), which wins; the HPA still "
               f"keeps the replicas it sets within its own bounds")
        if self._hpa_notes.get(key) != (other, why):
            self._hpa_notes[key] = (other, why)
            log.warning("runtime %s: %s %s (%s) is %s the HPA's %s %s, which the HPA keeps to whatever is served: "
                        "the adapter serves within %s %s and does not apply the HPA's %s; change one of the two",
                        key, name, value, origin, "below" if relation == "above" else "above", hpa_field, hpa_value,
                        name, value, hpa_field)
        return with_hpa_bounds(policy, hpa_min, hpa_max)

    def policy_for(self, key: RuntimeKey, annotations: Mapping[str, str] | None = None) -> RuntimePolicy:
        """The policy of one runtime; cheap to call every refresh (cached while its annotations stay the same).

        Annotations that spell a policy key otherwise than documented (`autoscaling.modelmesh.io/...`,
        `autoscaler.modelmesh.io/Max-Replicas`) are not applied but warned about: whoever wrote one thinks it
        applies (`near_miss`); the file's spelling under our prefix still applies, warned about (`read_as`)."""
        annotations = annotations or _NO_ANNOTATIONS
        cached = self._cache.get(key)
        if cached is not None and (cached[0] is annotations or cached[0] == annotations):  # a dict compare, in C
            return cached[2]
        ours = tuple(sorted((k, v) for k, v in annotations.items() if written_for_us(k)))
        if cached is not None and cached[1] == ours:  # another annotation changed (a rollout's revision)
            self._cache[key] = (annotations, ours, cached[2], cached[3])
            return cached[2]
        layer = self._origins.get(key if key in self.runtimes else None, {})
        annotated = apply_annotations(key, self.runtimes.get(key, self.defaults), ours,
                                      self._memory.setdefault(key, AnnotationMemory()),
                                      lambda f: layer.get(f, BUILT_IN_ORIGIN))
        policy, applied, ignored = annotated.policy, annotated.origins, annotated.ignored
        explained = tuple(  # every key a layer above the built-in decided (`deciding`), every mistake
            (f, getattr(policy, f), origin or BUILT_IN_ORIGIN, ignored.get(f)) for f in FIELDS
            if (origin := applied.get(f) or layer.get(f)) is not None or f in ignored), annotated.unknown
        if cached is not None and cached[2] != policy:
            changes = ", ".join(f"{f} {show_value(getattr(cached[2], f))} -> {show_value(getattr(policy, f))}"
                                for f in FIELDS if getattr(cached[2], f) != getattr(policy, f))
            log.info("runtime %s: policy annotations changed: %s", key, changes)
        self._cache[key] = (annotations, ours, policy, explained)
        return policy

    def forget(self, key: RuntimeKey) -> None:
        """Drop what the book keeps of a runtime gone or created again (`autoscaler.forgetting`): its cached
        policy, its annotations' last good values and the mistakes warned about, its HPA note. Runtimes come and
        go for days (a policy kept for each one ever seen grows without end), and a Deployment created again is
        another object: "an annotation that was never good uses the file's value" holds for it too."""
        self._cache.pop(key, None)
        self._memory.pop(key, None)
        self._hpa_notes.pop(key, None)

    def warn_unmatched(self, keys: Collection[RuntimeKey]) -> None:
        """Called every refresh with the runtimes it saw: warns once of each `runtimes:` entry matching none."""
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


def parse_policy_book(document: object, source: str, base: RuntimePolicy | None = None,
                      given_by: Mapping[str, str] | None = None) -> PolicyBook:
    """Build a PolicyBook from a parsed config document; `source` names it in errors (the file path), `given_by`
    where the flags' keys were written (`flag_origins`)."""
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
                 if unknown[0] in HINTS else "")
        raise ConfigError(f"{source}: unknown top-level key {unknown[0]!r} (expected 'defaults', 'runtimes'){where}")
    defaults = _layer(base or RuntimePolicy(), document.get("defaults"), source, "defaults")
    default_origins = flag_origins(base or RuntimePolicy(), given_by)
    default_origins.update(deciding(_origins_of(document.get("defaults"), f"{source}: defaults"), defaults,
                                    base or RuntimePolicy()))
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
                _refuse_unknown_entry_key(overrides, f"{source}: {where}")
                raise ConfigError(f"{source}: {where}: {name} must be a non-empty string, got {value!r}")
        key = RuntimeKey(str(namespace), str(deployment))
        if (problem := runtime_key_problem(key.namespace, key.deployment)) is not None:
            raise ConfigError(f"{source}: {where}: {problem}")
        if key in runtimes:
            raise ConfigError(f"{source}: {where}: runtime {key} is listed twice")
        runtimes[key] = _layer(defaults, overrides, source, f"{where} ({key})")
        origins[key] = {**default_origins, **_origins_of(overrides, f"{source}: {where}")}
    return PolicyBook(defaults=defaults, runtimes=runtimes, origins=origins)


_ENTRY_KEYS: Final = ("namespace", "deployment", *FIELDS)


def _refuse_unknown_entry_key(entry: Mapping[object, object], where: str) -> None:
    """Name a `runtimes:` entry's unknown key, with the policy keys' hint: a misspelt `deploymnet:` was said as
    "deployment must be a non-empty string, got None", which never named the key written."""
    for key in entry:
        if str(key) not in _ENTRY_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(str(key), _ENTRY_KEYS)}")


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
