"""Where the demo's requests go: each phase's background spread over the Ready pods, and the hot model's requests
over its copies, least busy copy first, as ModelMesh routes them.

Why: the hot model's requests all went to the oldest pod, whatever the pods the scale-up added held. The table
showed `demo-0  345` against a target of 100 through the whole hot phase at maxReplicas, while only the other pods'
load fell, though the added pods hold copies of the oldest pod's models (`fleet.DemoFleet.add_pod`). ModelMesh
copies a model whose pod is busy onto a less busy one and sends each request to the least busy copy; here each
Ready added pod holds a copy of the hot model, so its requests spread over them.

And ModelMesh keeps a hot model's copies while it is hot: a copy whose pod goes is loaded again on a kept pod
(`hot_model_pods`). A removed copy's share once went back to the copies left: the hot pod rose again, the adapter's
skew-aware load with it, and the demo scaled up right after the traffic drop, starting a pod the next scale-down
removed before it ever started. Deterministic: the same pods give the same loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.simulation.fluid import water_fill  # pure arithmetic: no numpy, not the simulate extra


@dataclass
class _Copy:
    """One copy of the hot model, as `water_fill` fills it: its pod and the pod's req/s so far."""

    name: str
    rate: float


def fill_least_busy_first(base: Mapping[str, float], copies: Sequence[str], hot: float) -> dict[str, float]:
    """The hot model's req/s on each of its `copies`, given each copy's other load (`base`): every request goes to
    the least busy copy, so the load fills the least busy up to the next, and so on (`fluid.water_fill`, the
    simulator's routing). Sums to `hot` (none without copies)."""
    held = [_Copy(name, base[name]) for name in copies]
    if hot > 0:
        water_fill(held, hot)
    return {copy.name: copy.rate - base[copy.name] for copy in held}


def hot_model_pods(ready: Sequence[str], holders: Sequence[str], keep: int) -> list[str]:
    """The Ready pods serving the hot model: the Ready `holders` of its models, then, up to `keep` copies (the most
    it had while hot), other Ready pods in `ready`'s order (oldest first: they are equally busy), each a copy
    ModelMesh loaded again where a pod holding one was removed; the oldest Ready pod where none holds it.

    Holding more than it keeps (after the drop it keeps one, and three pods hold it) adds no other: the count of
    others to take was negative there, and a negative slice took all but the last few, so a pod not holding it
    served the hot model after the drop, said to load it again."""
    held = [name for name in ready if name in holders]
    others = [name for name in ready if name not in holders]
    return held + others[:max(0, max(1, min(keep, len(ready))) - len(held))]


def pod_loads(ready: Sequence[str], copies: Sequence[str], background: float, hot: float) -> dict[str, float]:
    """Each Ready pod's req/s: `background` (the whole runtime's) spread evenly over `ready`, and `hot` over
    `copies` (a subset of `ready`: the hot model's pods), least busy first (`fill_least_busy_first`)."""
    if not ready:
        return {}
    even = background / len(ready)
    base = dict.fromkeys(ready, even)
    spread = fill_least_busy_first(base, [name for name in copies if name in base], hot)
    return {name: even + spread.get(name, 0.0) for name in ready}
