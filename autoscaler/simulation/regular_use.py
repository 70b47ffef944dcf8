"""ModelMesh's second copy for "regular" use: a one-copy model used again 7 to 40 minutes after a prior use.

Besides copies for load, ModelMesh's rate task (kserve/modelmesh src/main/java/com/ibm/watson/modelmesh/
ModelMesh.java, `rateTrackingTask`, with `SECOND_COPY_MIN_AGE_SECS` 420 and `SECOND_COPY_MAX_AGE_SECS` 2400)
keeps, for each model with one copy, the two latest rate-check iterations it was used in
(`CacheEntry.earlierUseIteration`, `lastUsedIteration`). When a use comes and one of them lies between 7 and 40
minutes back, it loads a second copy elsewhere, provided the cluster's caches are at least 10% free (or the
oldest copy anywhere is over 20 hours old, which a day's trace never sees). A model in use without a break
never triggers it: its earlier use is always the previous check.
"""

from __future__ import annotations

MIN_AGE_S = 420.0
MAX_AGE_S = 2400.0
_NEVER = float("-inf")
_NEVER_USED = (_NEVER, _NEVER)  # made once: `used` runs for every one-copy model at every routing


class RegularUse:
    """The two latest uses of each one-copy model, and whether a use now asks for a second copy."""

    def __init__(self) -> None:
        self._uses: dict[int, tuple[float, float]] = {}  # model -> (earlier use, last use)

    def forget(self, model: int) -> None:
        """A fresh cache entry (a cold load) starts with no recorded uses, as ModelMesh's does."""
        self._uses.pop(model, None)

    def used(self, model: int, now: float) -> bool:
        """Record a use at `now`; True when ModelMesh would add a second copy for it."""
        earlier, last = self._uses.get(model, _NEVER_USED)
        if last == now:
            return False  # the same check again (a re-route within the bucket)
        lower, upper = now - MAX_AGE_S, now - MIN_AGE_S
        earlier_in = last_in = False
        if last >= lower and earlier <= upper:
            earlier_in = earlier >= lower
            last_in = last <= upper
        if last_in or not earlier_in:
            earlier = last
        self._uses[model] = (earlier, now)
        return earlier_in or last_in
