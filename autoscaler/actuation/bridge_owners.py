"""Which RuntimeScale owns each ServingRuntime (docs/design.md, "one RuntimeScale per ServingRuntime").

Two RuntimeScales that name the same ServingRuntime (a copy applied under another name, each with its HPA) would
both carry their `spec.replicas` to it: the runtime flipped between the two asks on every pass, and
modelmesh-serving started and stopped pods each time. So each (namespace, `spec.servingRuntime`) has one owner,
decided the same way on every replica and every path without any state of its own: the oldest RuntimeScale by
`metadata.creationTimestamp`, then by name (a tie within the same second). A copy applied later never takes the
runtime over; when the owner is deleted the next oldest owns it. Only the owner's `spec.replicas` is carried
(`ReplicaBridge`) and counts as what the HPA asked for (`RuntimeScaleWatch.replicas_for`); the others are told so
in their status (`bridge_status.duplicate`), as the HPA controller reports `AmbiguousSelector` rather than pick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.actuation.bridge_status import deployment_name, replicas_of
from autoscaler.kube.timestamps import posix_seconds

ScaleId = tuple[str, str]
"""(namespace, name) of a RuntimeScale."""
RuntimeId = tuple[str, str]
"""(namespace, spec.servingRuntime) of a RuntimeScale: what one RuntimeScale owns."""

def creation_order(scale: Mapping[str, Any]) -> tuple[float, str]:
    """The RuntimeScale's place in the line for its runtime: creation time, then name; the smallest owns it. One
    without a readable creationTimestamp (the API server always sets one) counts as the newest: it never takes a
    runtime from one whose age is known."""
    meta = scale.get("metadata") or {}
    created = posix_seconds(meta.get("creationTimestamp"))
    return (math.inf if created is None else created), str(meta.get("name") or "")


@dataclass(frozen=True, slots=True)
class Claim:
    """What one RuntimeScale asks of its runtime."""

    runtime: RuntimeId
    order: tuple[float, str]
    deployment: str
    """The runtime Deployment it scales (`spec.deployment`, else modelmesh-serving's name)."""
    replicas: int | None
    """Its `spec.replicas`, None until set."""
    created: str
    """`metadata.creationTimestamp` as written, for messages."""


class RuntimeOwners:
    """The RuntimeScales seen, by the runtime they name: `owner` answers in O(RuntimeScales of that runtime)
    (one, unless misconfigured), as the bridge and the watch ask for each of 5,000 runtimes a pass."""

    def __init__(self) -> None:
        self._claims: dict[ScaleId, Claim] = {}
        self._by_runtime: dict[RuntimeId, set[ScaleId]] = {}
        self._by_deployment: dict[tuple[str, str], set[ScaleId]] = {}

    def __len__(self) -> int:
        return len(self._claims)

    def note(self, key: ScaleId, scale: Mapping[str, Any]) -> None:
        """`scale` as now seen (added or changed): its runtime, age and ask replace what was known of it. One
        without a `spec.servingRuntime` claims nothing."""
        self.drop(key)
        runtime = (scale.get("spec") or {}).get("servingRuntime")
        if not isinstance(runtime, str) or not runtime:
            return
        created = (scale.get("metadata") or {}).get("creationTimestamp")
        claim = Claim((key[0], runtime), creation_order(scale), deployment_name(scale), replicas_of(scale),
                      created if isinstance(created, str) else "")
        self._claims[key] = claim
        self._by_runtime.setdefault(claim.runtime, set()).add(key)
        self._by_deployment.setdefault((key[0], claim.deployment), set()).add(key)

    def drop(self, key: ScaleId) -> None:
        """Forget a RuntimeScale (deleted)."""
        claim = self._claims.pop(key, None)
        if claim is None:
            return
        for index, group in ((self._by_runtime, claim.runtime), (self._by_deployment, (key[0], claim.deployment))):
            members = index[group]
            members.discard(key)
            if not members:
                del index[group]

    def replace(self, namespace: str | None, scales: Iterable[tuple[ScaleId, Mapping[str, Any]]]) -> None:
        """A fresh list of the RuntimeScales of `namespace` (None: all namespaces): those not in it are gone."""
        listed = dict(scales)
        for key in [key for key in self._claims if (namespace is None or key[0] == namespace) and key not in listed]:
            self.drop(key)
        for key, scale in listed.items():
            self.note(key, scale)

    def claim(self, key: ScaleId) -> Claim | None:
        return self._claims.get(key)

    def owner(self, runtime: RuntimeId) -> ScaleId | None:
        """The RuntimeScale that owns `runtime`: the oldest of those that name it, then by name."""
        members = self._by_runtime.get(runtime)
        if not members:
            return None
        return min(members, key=lambda key: self._claims[key].order)

    def owner_replicas(self, namespace: str, deployment: str) -> int | None:
        """The owner's `spec.replicas` for runtime Deployment `namespace/deployment`; None when no owner of a
        runtime scales it or the owner has none yet (a duplicate's ask never counts)."""
        asks = []
        for runtime in {self._claims[key].runtime for key in self._by_deployment.get((namespace, deployment), ())}:
            owner = self.owner(runtime)
            claim = None if owner is None else self._claims[owner]
            if claim is not None and claim.deployment == deployment and claim.replicas is not None:
                asks.append(claim.replicas)
        return max(asks) if asks else None  # two runtimes on one Deployment (a spec.deployment typo): the larger
