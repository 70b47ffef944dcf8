"""A `cachetools.TTLCache` whose fresh entries are also read with one dict lookup, for the authorization cache.

Every request the adapter serves looks its (user, attributes) up in the review caches (`authz`). A
`TTLCache` lookup is three Python frames (`TTLCache.__getitem__`, its timer, `Cache.__getitem__`) and three
hashes of that key (its links, the LRU move, its data): about 7,700 instructions, some 2% of a request
(docs/performance.md). `ReviewCache` keeps the `TTLCache` for what it is for (its size bound, its eviction,
the removal of expired entries) and beside it `fresh`, each entry's value with the time it expires: the very
expiry the `TTLCache` computes (the insert reads the cache's timer once, frozen for the `TTLCache`'s own
insert), so `lookup` finds an entry exactly while `TTLCache.__getitem__` would, and never after it expired.

`fresh` holds what the `TTLCache` holds: every insert, deletion (`pop`, `del`), eviction (`popitem`) and
expiry (`expire`, which `cachetools` runs on every insert and which returns what it removed since 5.5)
passes through the methods below. One difference: a lookup does not move the entry to the LRU end, so a
full cache evicts by last insert rather than last use (the authorizer inserts a key in use again every
`refresh_ahead` of its TTL, and the fleet's keys fit the default size several times over).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from time import monotonic
from typing import Generic, TypeVar

from cachetools import TTLCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ReviewCache(TTLCache[K, V], Generic[K, V]):
    def __init__(self, maxsize: int, ttl: float, timer: Callable[[], float] = monotonic) -> None:
        super().__init__(maxsize, ttl, timer=timer)
        self.fresh: dict[K, tuple[V, float]] = {}
        """Each entry's value and the time (on `timer`) from which it is expired."""

    def lookup(self, key: K, now: float) -> V | None:
        """The value of `key` if it has not expired at `now` (a time read off this cache's timer), else None.
        (Callers on a hot path read `fresh` inline, as this does.)"""
        entry = self.fresh.get(key)
        return entry[0] if entry is not None and now < entry[1] else None

    def __setitem__(self, key: K, value: V) -> None:
        with self.timer as now:  # frozen: `TTLCache.__setitem__` reads this same time for its expiry
            super().__setitem__(key, value)
        self.fresh[key] = (value, now + self.ttl)

    def __delitem__(self, key: K) -> None:
        self.fresh.pop(key, None)
        super().__delitem__(key)

    def popitem(self) -> tuple[K, V]:
        key, value = super().popitem()
        self.fresh.pop(key, None)
        return key, value

    def expire(self, time: float | None = None) -> list[tuple[K, V]]:
        expired = super().expire(time)
        # cachetools before 5.5 returns None: its expired keys then stay in `fresh` (never found: expired)
        # until inserted again, bounded by the keys ever seen
        for key, _ in expired or ():
            self.fresh.pop(key, None)
        return expired
