"""What the decision reads off a runtime's signal stats (`SignalProfile`): each signal's coverage, the signals
present, which ones miss on no pod. Worked out once per stats mapping, not once per runtime: `signal_stats` hands
the same mapping to every runtime with the same counts, refresh after refresh, so `decide` finds the profile by
the mapping's identity in `PROFILES` (inline: a call costs as much as a small runtime's hit) and comes to
`work_out_profile` only on a miss (`bounded_cache`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from autoscaler.policies.bounded_cache import stored
from autoscaler.policies.signals import SIGNAL_CACHE, SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_REQUESTS, SignalStats

DESCRIBED: Final = (("GPU busy", SIGNAL_GPU), ("request rate", SIGNAL_REQUESTS), ("cache state", SIGNAL_CACHE))
"""The signals `decision._reason` names when no fresh pod reports them, in words."""


class SignalProfile(NamedTuple):
    """What the decision reads off a runtime's signal stats (`work_out_profile`): named fields, still a tuple
    (unpacked as fast as one)."""

    by_signal: Mapping[str, SignalStats]
    """The stats mapping it was worked out from (its cache key, kept alive by the entry)."""
    signal_coverage: dict[str, float]
    """The coverage of each signal present: the view's `signal_coverage`, shared like the mapping, never
    mutated."""
    reported_signals: frozenset[str]
    """The signals present, fresh on some pod or missing on one (for `seen`: a GPU reading whose own time is
    stale is reported, so a refresh where no pod carries one finds the GPU missing, not absent)."""
    fixed_complete: bool
    """The GPU, queue and cache signals miss on no pod."""
    rps_complete: bool
    """The request rate misses on no pod."""
    capacity_signals_present: bool
    """GPU busy, request rate and cache state are all present: `decision._reason` has none to name as absent."""


PROFILES: dict[int, SignalProfile] = {}

PROFILES_BOUND: Final = 4096
"""`PROFILES` is cleared at this many entries, one per signal stats mapping (`signal_stats` keeps as many
mappings)."""


def work_out_profile(by_signal: Mapping[str, SignalStats]) -> SignalProfile:
    """What the decision reads off a runtime's signal stats, worked out once per stats mapping rather than
    once per runtime: `signal_stats` hands the same mapping to every runtime with the same counts, refresh
    after refresh, so it is found by identity (the entry keeps the mapping alive, so its id is not reused
    while cached; cleared at `PROFILES_BOUND`)."""
    return stored(PROFILES, id(by_signal), SignalProfile(
        by_signal,
        _signal_coverage(by_signal),
        frozenset(signal for signal, stats in by_signal.items() if stats.fresh + stats.missing > 0),
        all(by_signal[signal].missing == 0 for signal in (SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_CACHE)),
        by_signal[SIGNAL_REQUESTS].missing == 0,
        all(by_signal[signal].fresh + by_signal[signal].missing > 0 for _, signal in DESCRIBED),
    ), PROFILES_BOUND)


def _signal_coverage(by_signal: Mapping[str, SignalStats]) -> dict[str, float]:
    """The coverage of each signal the runtime has (present), for the view; a loop, not a comprehension,
    as it runs for every runtime."""
    coverage: dict[str, float] = {}
    for signal, stats in by_signal.items():
        if stats.fresh + stats.missing > 0:
            coverage[signal] = stats.coverage
    return coverage
