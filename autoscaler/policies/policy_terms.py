"""The ranking terms and the view's bounds of a policy, made once per policy object and found by its identity:
`decision.decide` asks for them for every runtime of every refresh.
"""

from __future__ import annotations

from typing import Final

from autoscaler.policies.bounded_cache import stored
from autoscaler.policies.policy import RuntimePolicy, lower_bound
from autoscaler.policies.ranking import WeightedTerm, default_terms

__all__ = ["terms_and_bounds"]

_TERMS_BY_ID: dict[int, tuple[RuntimePolicy, tuple[WeightedTerm, ...], tuple[int, int | None]]] = {}

_TERMS_BY_ID_BOUND: Final = 65_536
"""`_TERMS_BY_ID` is cleared at this many entries: one policy per runtime of a 65,536-runtime fleet, well under
1 KiB each; more only cost rebuilding."""


def terms_and_bounds(policy: RuntimePolicy) -> tuple[tuple[WeightedTerm, ...], tuple[int, int | None]]:
    """`default_terms(policy)` and the view's `bounds`, made once per policy object rather than once per
    runtime and refresh, and found by the policy's identity: a refresh hands the same policy object to a
    runtime every time (`with_hpa_bounds` is cached), and hashing a 16-field policy costs more than the
    ranking of a small runtime. The entry keeps its policy alive, so an id is never reused while cached
    (cleared at `_TERMS_BY_ID_BOUND`). Both are immutable, so every view of the policy shares them."""
    hit = _TERMS_BY_ID.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1], hit[2]
    terms = default_terms(policy)
    bounds = (lower_bound(policy), policy.max_replicas)
    stored(_TERMS_BY_ID, id(policy), (policy, terms, bounds), _TERMS_BY_ID_BOUND)
    return terms, bounds
