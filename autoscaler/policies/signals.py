"""The per-pod signals whose freshness is judged one by one (docs/design.md, Missing data), their states, and their
counts.

A signal counts on a pod when the pod is Ready, the signal's timestamp is fresh and the pod reports it.
Where it does not, on a pod that should have it (other fresh pods report it, or the runtime reported it
before: `expected`), the signal is *missing* there, and the decision holds every value that uses it.

One exception, the GPU: a Ready pod with fresh load data whose exporter says it has no GPU collector at all
(`PodSample.no_gpu_collector`: started with `--no-gpu`) is *absent* for it, not missing. A missing reading may
come back (a pod before its first GPU sample, a GPU collector failing), so it holds; an absent one will not,
so a runtime whose Ready pods all say so forgets its GPU (`gpu_forgetting`). The load signals have no such
word: the exporter publishes the request rate, queue delay and model count together whenever its ModelMesh
collector has a reading, so one of them absent on a fresh pod is never a setting, only data not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from autoscaler.policies.bounded_cache import stored

SIGNAL_GPU: Final = "gpu"
SIGNAL_REQUESTS: Final = "requests"
SIGNAL_QUEUE: Final = "queue"
SIGNAL_CACHE: Final = "cache"
SIGNALS: Final = (SIGNAL_GPU, SIGNAL_REQUESTS, SIGNAL_QUEUE, SIGNAL_CACHE)
"""The per-pod signals whose freshness is judged one by one (docs/design.md, Missing data)."""
SIGNAL_MODELS: Final = "models"
"""Per-model use (`PodSample.recent_models`), on the load's clock: not one of SIGNALS (no served value reads it,
and it has no state per pod), but remembered in the decision's `seen` like them, so that a runtime that reported
it and reports it nowhere now holds the cache term rather than dropping its cache need (`Aggregate.models_missing`),
until no pod has reported it for `target_lru_age_s` (`models_forgetting`)."""

FRESH: Final = "fresh"
STALE: Final = "stale"
MISSING: Final = "missing"
ABSENT: Final = "absent"
NONE: Final = "none"
"""A signal's state on one pod: fresh; stale (its timestamp too old or never read); missing (not reported
while expected); absent (the GPU only: the pod's exporter has no GPU collector); none (the runtime has no such
signal). Not-Ready pods are always "none": they are left out."""


@dataclass(frozen=True, slots=True)
class SignalStats:
    """How well one signal is covered this refresh: the counts behind its coverage and hold rules."""

    fresh: int  # Ready pods on which it is fresh: the `n` of the values and terms that use it
    missing: int  # Ready pods on which it is stale or not reported although expected
    coverage: float  # fresh / the Ready pods that are not `absent` (0 when there is none)
    absent: int = 0  # Ready pods whose exporter has no collector of it (the GPU only: ABSENT)

    @property
    def present(self) -> bool:
        """Some Ready pod has it fresh, or should have: the signal belongs to this runtime."""
        return self.fresh + self.missing > 0

    @property
    def complete(self) -> bool:
        """No Ready pod misses it: values that use it may fall."""
        return self.missing == 0


_BY_COUNTS: dict[tuple[int, int, int, int, int, int, int, int, int, int], dict[str, SignalStats]] = {}
"""(*fresh, *expected, ready, gpu_absent) → `signal_stats`' mapping: shared, never mutated, bounded
(`_BY_COUNTS_BOUND`)."""

_BY_COUNTS_BOUND: Final = 4096
"""`_BY_COUNTS` is cleared at this many distinct counts (a few hundred bytes each, a megabyte or two in all): a
fleet's runtimes repeat far fewer. A cleared cache only costs rebuilding four stats and their mapping per new
count, and a new mapping also misses `decision`'s profile cache, which is keyed by the mapping's identity."""


def signal_stats(
    fresh: tuple[int, int, int, int], expected: tuple[bool, bool, bool, bool], ready: int, gpu_absent: int = 0,
) -> dict[str, SignalStats]:
    """Each signal of SIGNALS with its counts: `fresh` pods per signal, and as missing the Ready pods on
    which an expected signal is not fresh, but the `gpu_absent` ones for the GPU (ABSENT). A GPU's coverage is
    of the pods that have one: the others are not waited for.

    Shared, never mutated: a runtime's counts repeat from refresh to refresh, and building four stats and
    their mapping per runtime cost more than the rest of a small runtime's aggregation. Bounded: cleared
    when it reaches `_BY_COUNTS_BOUND` distinct counts."""
    key = (*fresh, *expected, ready, gpu_absent)
    found = _BY_COUNTS.get(key)
    if found is None:
        found = {}
        for s, f, e in zip(SIGNALS, fresh, expected, strict=True):
            absent = gpu_absent if s == SIGNAL_GPU else 0
            judged = ready - absent  # the Ready pods that should have it
            found[s] = SignalStats(fresh=f, missing=judged - f if e else 0, coverage=f / judged if judged else 0.0,
                                   absent=absent)
        stored(_BY_COUNTS, key, found, _BY_COUNTS_BOUND)
    return found


USED_GPU: Final = 1
USED_REQUESTS: Final = 2
USED_QUEUE: Final = 4
USED_CACHE: Final = 8
GPU_TIME_FRESH: Final = 16
LOAD_TIME_FRESH: Final = 32
GPU_ABSENT: Final = 64
NOT_READY: Final = 128
"""A Ready pod's *state code* holds, per signal of SIGNALS, whether it is used (bits 0-3, `USED_*`), and
whether the GPU (`GPU_TIME_FRESH`) and the load (`LOAD_TIME_FRESH`) timestamps are fresh, or the pod has no GPU
collector (`GPU_ABSENT`: its GPU is ABSENT); a pod that is not Ready has the code `NOT_READY` (every signal
"none"). A pass over the pods keeps one small int per pod, and
the states (which depend on every pod: is the signal expected?) are looked up once the pass is over."""

_STATE_TABLES: dict[tuple[bool, ...], tuple[tuple[tuple[str, str], ...], ...]] = {}
"""State code → (signal, state) pairs, per `expected` mask (16 masks x 129 codes at most, built on first use)."""

ALL_FRESH: Final = tuple((s, FRESH) for s in SIGNALS)
"""The states of a pod with every signal fresh: the row of the usual pod in every `state_table`, this very
object (rows are interned), so that a pass over the pod views can tell the usual pod by identity."""

_ROWS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {ALL_FRESH: ALL_FRESH}
"""Every row of every state table, once (equal rows of two masks are the same tuple)."""


def state_table(expected: tuple[bool, ...]) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Every pod's possible signal states for one `expected` mask (per signal of SIGNALS), indexed by state
    code; the tuples are shared by every pod and runtime with the same states."""
    table = _STATE_TABLES.get(expected)
    if table is None:
        rows = []
        for code in range(NOT_READY + 1):
            if code == NOT_READY:
                rows.append(tuple((s, NONE) for s in SIGNALS))
                continue
            load_ok = bool(code & LOAD_TIME_FRESH)
            time_ok = (bool(code & GPU_TIME_FRESH), load_ok, load_ok, load_ok)
            row = tuple(
                (s, FRESH if code >> j & 1 else ABSENT if j == 0 and code & GPU_ABSENT
                 else (MISSING if time_ok[j] else STALE) if expected[j] else NONE)
                for j, s in enumerate(SIGNALS)
            )
            rows.append(_ROWS.setdefault(row, row))
        table = _STATE_TABLES[expected] = tuple(rows)
    return table
