"""Where the demo's requests go: each phase's background spread over the Ready pods, and the hot model's requests
over its copies, least busy copy first, as ModelMesh routes them.

Why: the hot model's requests all went to the oldest pod, whatever the pods the scale-up added held. The table
showed `demo-0  345` against a target of 100 through the whole hot phase at maxReplicas, while only the other pods'
load fell, though the added pods hold copies of the oldest pod's models (`fleet.DemoFleet.add_pod`). ModelMesh
copies a model whose pod is busy onto a less busy one and sends each request to the least busy copy; here each
Ready added pod holds a copy of the hot model, so its requests spread over them, and a removed copy's share goes
back to the copies left. Deterministic: the same pods give the same loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def fill_least_busy_first(base: Mapping[str, float], copies: Sequence[str], hot: float) -> dict[str, float]:
    """The hot model's req/s on each of its `copies`, given each copy's other load (`base`): every request goes to
    the least busy copy, so the load fills the least busy up to the next, and so on (the copies the hot model
    reaches end level, the others keep their load). Sums to `hot` (none without copies)."""
    if hot <= 0:
        return dict.fromkeys(copies, 0.0)
    if not copies:
        return {}
    order = sorted(copies, key=lambda name: (base[name], copies.index(name)))
    level, left, filled = base[order[0]], hot, 1
    while filled < len(order) and left > 0:
        step = (base[order[filled]] - level) * filled
        if step >= left:
            break
        left -= step
        level = base[order[filled]]
        filled += 1
    level += left / filled
    return {name: level - base[name] if index < filled else 0.0 for index, name in enumerate(order)}


def pod_loads(ready: Sequence[str], copies: Sequence[str], background: float, hot: float) -> dict[str, float]:
    """Each Ready pod's req/s: `background` (the whole runtime's) spread evenly over `ready`, and `hot` over
    `copies` (a subset of `ready`: the hot model's pods), least busy first (`fill_least_busy_first`)."""
    if not ready:
        return {}
    even = background / len(ready)
    base = dict.fromkeys(ready, even)
    spread = fill_least_busy_first(base, [name for name in copies if name in base], hot)
    return {name: even + spread.get(name, 0.0) for name in ready}
