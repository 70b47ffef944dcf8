"""The miss path of the policies' per-refresh caches: store an entry, emptying the cache first at its bound.

Each cache (`signal_profile.PROFILES`, `policy_terms._TERMS_BY_ID`, `podviews._WEIGHTS_BY_ID`, `pod_codes._BY_CODES`,
`signals._BY_COUNTS`) is looked up for every runtime of every refresh, so each caller looks it up inline (a call
costs as much as a small runtime's hit) and comes here only on a miss. Emptying the whole cache at the bound,
rather than evicting one entry, keeps a hit to one dict lookup and bounds the memory; a cleared cache only costs
rebuilding its entries.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def stored(cache: dict[K, V], key: K, value: V, bound: int) -> V:
    """`value`, stored in `cache` under `key`; `cache` is emptied first when it holds `bound` entries."""
    if len(cache) >= bound:
        cache.clear()
    cache[key] = value
    return value
