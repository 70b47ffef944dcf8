"""The HPA controller's side of one sync against real objects, for closed-loop tests: the algorithm itself is
`autoscaler.simulation.hpa` (the one HPA model, shared with the simulator and the demo, checked against the
Kubernetes documentation's worked examples); this drives it the way the controller drives its own:

1. read the target's scale subresource (`GET .../scale`, `autoscaling/v1` `Scale`): the current replicas are
   its `spec.replicas`; an empty `status.selector` stops here (the controller reports "selector is required"),
   and so does 0 replicas (scaling is disabled for a target scaled to zero);
2. read the metric through the external metrics API; a failure stops here (`FailedGetExternalMetric`: the
   HPA holds its replicas);
3. ask the HPA model for its decision (tolerance, windows, behavior policies, min and max);
4. when it differs, write the scale (`PUT .../scale` with the `resourceVersion` read: a conflict waits for the
   next sync) and only then record the scale, as the controller records scale events after the update.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from autoscaler.simulation.hpa import HorizontalPodAutoscaler
from autoscaler.simulation.hpa_spec import HpaSpec


@dataclass
class HpaStep:
    scale_url: str
    """`.../namespaces/{ns}/{plural}/{name}/scale` on the Kubernetes API."""
    read_metric: Callable[[], Awaitable[float | None]]
    """The external metric's value through the metrics API; None when the API did not answer one."""
    spec: HpaSpec
    """One External metric (the one `read_metric` reads), its target, the replica bounds and the behavior."""
    clock: Callable[[], float] = time.monotonic
    token: str = "horizontal-pod-autoscaler-token"
    """The controller's service-account token, sent with every call to the Kubernetes API, as the controller
    authenticates (the fake refuses a call without one once it has handed out a kubeconfig)."""
    hpa: HorizontalPodAutoscaler = field(init=False)
    events: list[str] = field(default_factory=list)
    """What the controller would record as events: `SuccessfulRescale`, `FailedGetScale`, ..."""
    reasons: list[str] = field(default_factory=list)
    """Why each rescale happened, in the HPA model's words."""

    def __post_init__(self) -> None:
        if len(self.spec.metrics) != 1 or self.spec.metrics[0].kind != "External":
            raise ValueError("HpaStep reads one External metric")
        self.hpa = HorizontalPodAutoscaler(self.spec)

    async def sync(self, session: aiohttp.ClientSession) -> int | None:
        """One reconcile; returns the replicas written, or None when nothing was written."""
        auth = {"Authorization": f"Bearer {self.token}"}
        async with session.get(self.scale_url, headers=auth) as response:
            if response.status != 200:
                self.events.append(f"FailedGetScale {response.status}")
                return None
            scale: dict[str, Any] = await response.json()
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        if not (scale.get("status") or {}).get("selector"):
            self.events.append("InvalidSelector selector is required")
            return None
        if current == 0:
            self.events.append("ScalingDisabled")
            return None
        value = await self.read_metric()
        if value is None:
            self.events.append("FailedGetExternalMetric")
            return None
        now = self.clock()
        decision = self.hpa.recommend(now, current, (), {self.spec.metrics[0].name: value})
        if not decision.changed:
            return None
        scale["spec"] = {"replicas": decision.desired}
        async with session.put(self.scale_url, json=scale, headers=auth) as response:
            if response.status != 200:
                self.events.append(f"FailedRescale {response.status}")
                return None
        self.hpa.record_scale(now, decision)
        self.events.append(f"SuccessfulRescale {current} -> {decision.desired}")
        self.reasons.append(decision.reason)
        return decision.desired
