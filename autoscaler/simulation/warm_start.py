"""Which of the first interval's models a warm runtime holds: the busiest, as many as its caches take.

A runtime that has served a load for a while holds what its LRU caches kept, and an LRU cache evicts the least
used: when the models outnumber the slots, the quietest are the ones left out. Routing the first interval
onto empty pods would load the models to load quietest first (routing.py routes them so, for the cold loads
of a running trace), fill the caches with them and then refuse the busiest one's load under the churn limit
(every copy used at that instant): a trace of 12 models for 10 slots failed its busiest model's requests, 80%
of the trace, for the whole day under every policy that did not scale, and blamed ModelMesh's churn limit.
"""

from __future__ import annotations

from collections.abc import Sequence


def busiest_that_fit(models: Sequence[int], rates: Sequence[float], slots: int) -> tuple[list[int], list[float]]:
    """The `slots` busiest of `models` (ties: the first listed), in their given order, with their rates; all of
    them, unchanged, where they fit (so a runtime with room starts exactly as it did before this was chosen)."""
    if len(models) <= slots:
        return list(models), list(rates)
    ranked = sorted(range(len(models)), key=lambda i: -rates[i])  # stable: ties keep the first listed
    kept = sorted(ranked[:max(0, slots)])
    return [models[i] for i in kept], [rates[i] for i in kept]
