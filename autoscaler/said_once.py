"""What a warning was said of, once each: kept while the thing is there, and a bounded number of those gone.

Why both: a warning said once per object (an HPA named like its runtime Deployment, `sources.kube_hpas`) must
not be said again at every event of that object, nor when a GitOps tool re-creates the object it saw deleted
(modelmesh-serving's controller deletes that HPA, the tool applies it again, minutes apart). But a set of every
object ever warned about grows with churn for as long as the adapter runs. So the objects still there are kept
for as long as they are, and of those gone only the `gone_kept` most recently gone: one re-created after more
than that many others went is warned about again, which is news after so long.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class SaidOnce(Generic[K]):
    """The keys a warning was said of: those live, and the `gone_kept` most recently gone."""

    def __init__(self, gone_kept: int) -> None:
        self._gone_kept = gone_kept
        self._live: set[K] = set()
        self._gone: dict[K, None] = {}  # in the order they went, the earliest first

    def first_time(self, key: K) -> bool:
        """True the first time `key` is asked about (the warning is to be said now), False after."""
        if key in self._live:
            return False
        self._live.add(key)
        if key in self._gone:  # re-created within the bound: said already
            del self._gone[key]
            return False
        return True

    def keep(self, live: Collection[K]) -> None:
        """The keys said of that are not in `live` are gone: remembered, the earliest gone forgotten past the
        bound. A key that comes back is not said again while it is remembered (`first_time`)."""
        for key in [key for key in self._live if key not in live]:
            self._live.discard(key)
            self._gone[key] = None
        while len(self._gone) > self._gone_kept:
            del self._gone[next(iter(self._gone))]

    def __len__(self) -> int:
        """How many keys are remembered: at most those live and `gone_kept` more."""
        return len(self._live) + len(self._gone)
