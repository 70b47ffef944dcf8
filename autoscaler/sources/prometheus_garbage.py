"""The garbage Prometheus gives for a pod, as `PrometheusSource` says it: counted per series, logged once at its
start, and shown in /debug for as long as it lasts.

A value above its signal's ceiling (`samples.CEILINGS`) makes the whole reading garbage, and the pod's last good
sample is held; a value that is no number a policy can use (NaN, infinite, negative, unparseable) leaves only its
signal absent (unknown, never zero), unless it is the freshness series, which holds the whole sample too. Apart
from the source, whose job is joining answers to the inventory, so that what a garbled pod costs in memory and
in words is read in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from autoscaler.model import RuntimeKey
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.base import RuntimeInventory, SourceProblem, ongoing_problem
from autoscaler.sources.prometheus_promql import PodRef

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name


class Garbled(NamedTuple):
    """A pod's values this refresh that are no number a policy can use (NaN, infinite, negative, unparseable)."""

    values: str
    """Each series and its value as Prometheus wrote it (`modelmesh_pod_requests_per_second NaN`), for /debug."""
    holds_sample: bool
    """Whether one is the freshness series: without it the whole sample is held, not only those signals."""


class PrometheusGarbage:
    """What is garbage now, per pod and per series, for the log (`note`), the counter (`count`, the source's
    `errors` and `on_error`) and /debug (`problems`); Prometheus at `url` is named in what /debug says."""

    def __init__(self, url: str, count: Callable[[str], None]) -> None:
        self._url = url
        self._count = count
        self._said: set[tuple[str, str, str]] = set()  # (namespace, pod, field) whose garbage the log said
        self._refusing: dict[PodRef, str] = {}  # pods whose last reading had a value above its ceiling, and why
        self._garbled: dict[PodRef, Garbled] = {}  # pods whose last reading had NaN, infinite or negative values
        self._problems: dict[RuntimeKey, dict[str, SourceProblem]] = {}  # both, for /debug, by runtime

    def note(self, ref: PodRef, field: str, *, bad: bool, raw: str | None, counted: bool = False,
             why: str | None = None) -> None:
        """Whether the pod's `field` is garbage this refresh (`raw`, refused for `why` when above its ceiling):
        counted unless the caller already did (`counted`), logged when it starts."""
        key = (ref[0], ref[1], field)
        if not bad:
            self._said.discard(key)
            return
        if not counted:
            self._count(REASON_GARBAGE)
        if key not in self._said:
            self._said.add(key)
            if why is None:
                log.warning("Prometheus gave %s/%s a %s of %r; leaving it absent", ref[0], ref[1], field, raw)
            else:
                log.warning("Prometheus gave %s/%s a %s of %r, which no real pod reaches (%s); holding the pod's "
                            "last good sample (check its exporter and ModelMesh)", ref[0], ref[1], field, raw, why)

    def note_reading(self, ref: PodRef, garbled: list[str], freshness_garbled: bool, refused: list[str]) -> None:
        """Keep what was garbage in the pod's reading this refresh (`garbled`: each series and its value;
        `refused`: the values above their ceilings, as `samples.refusal` says them), for `note_runtime`."""
        if garbled:
            self._garbled[ref] = Garbled(", ".join(garbled), freshness_garbled)
        else:
            self._garbled.pop(ref, None)
        if refused:
            self._refusing[ref] = "; ".join(refused)
        else:
            self._refusing.pop(ref, None)

    def note_runtime(self, runtime: RuntimeInventory, now: float) -> None:
        """Keep, for /debug, the runtime's pods whose reading had a value above its ceiling or values that are no
        reading (`note_reading`), each a `garbage` problem since its first such reading: the log says it once, at
        its start, and an operator at /debug an hour later should not need that line (the scrape source shows
        its garbled answers so too)."""
        before = self._problems.get(runtime.key, {})
        found = {}
        for target in runtime.pods:
            ref = (runtime.key.namespace, target.name)
            detail = self._detail(self._refusing.get(ref), self._garbled.get(ref))
            if detail is not None:
                found[target.name] = ongoing_problem(before.get(target.name), REASON_GARBAGE, detail, now,
                                                     target.name)
        if found:
            self._problems[runtime.key] = found
        else:
            self._problems.pop(runtime.key, None)

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """The runtime's pods' garbage now, for /debug."""
        return tuple(self._problems.get(key, {}).values())

    def forget(self, known: Collection[PodRef], inventory: Mapping[RuntimeKey, RuntimeInventory]) -> None:
        """Drop what is kept of pods and runtimes discovery no longer lists, so it stays bounded as they go."""
        self._said = {key for key in self._said if (key[0], key[1]) in known}
        self._refusing = {ref: why for ref, why in self._refusing.items() if ref in known}
        self._garbled = {ref: what for ref, what in self._garbled.items() if ref in known}
        for key in [key for key in self._problems if key not in inventory]:
            del self._problems[key]

    def _detail(self, refused: str | None, garbled: Garbled | None) -> str | None:
        """What /debug says of a pod's garbage values: those above a ceiling hold its whole last good sample;
        those that are no number it can use leave only their signals absent (unknown, never zero), but a garbled
        freshness series holds the whole sample too."""
        if refused is None and garbled is None:
            return None
        said = [f"a value no real pod reaches: {refused}"] if refused is not None else []
        if garbled is not None:
            said.append(f"values that are no reading (NaN, infinite or negative): {garbled.values}")
        held = refused is not None or (garbled is not None and garbled.holds_sample)
        outcome = ("holding its last good sample" if held else
                   "leaving those signals absent (unknown, never zero), which holds the values that use them")
        return (f"Prometheus at {self._url} gave the pod {'; and '.join(said)}; {outcome} until it gives good "
                "ones (check its exporter and ModelMesh)")
