"""One sync of a HorizontalPodAutoscaler with one External metric, written from the Kubernetes documentation
("Horizontal Pod Autoscaling", "Algorithm details" and "Configurable scaling behavior"), for closed-loop tests.

Minimal on purpose: `autoscaler/simulation/hpa.py` (another branch) models the whole algorithm; this step is the
part a loop test against the real API needs, driving the real objects the way the HPA controller does:

1. read the target's scale subresource (`GET .../scale`, `autoscaling/v1` `Scale`): the current replicas are
   its `spec.replicas`; an empty `status.selector` stops here (the controller reports "selector is required");
2. read the metric through the external metrics API; a failure stops here (`FailedGetExternalMetric`: the
   HPA holds its replicas);
3. `AverageValue` target: `desired = ceil(value / target)`, unless `value / (target * current)` is within the
   tolerance (0.1) of 1, then `current`;
4. scale-down stabilization: the highest recommendation of the last `down_window_s`; scale-up: at most
   `max(current * 2, current + 4)` per step (the default policies, one period per step);
5. scale-down rate: at most `down_pods` fewer pods per `down_period_s`;
6. clamp to `[min_replicas, max_replicas]` and, when it differs, write the scale (`PUT .../scale` with the
   `resourceVersion` read: a conflict waits for the next sync).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

TOLERANCE = 0.1


@dataclass
class HpaStep:
    scale_url: str
    """`.../namespaces/{ns}/{plural}/{name}/scale` on the Kubernetes API."""
    read_metric: Callable[[], Awaitable[float | None]]
    """The external metric's value through the metrics API; None when the API did not answer one."""
    min_replicas: int = 1
    max_replicas: int = 10
    target_average_value: float = 1.0
    down_window_s: float = 300.0
    down_pods: int = 1
    down_period_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_downs: list[tuple[float, int]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    """What the controller would record as events: `SuccessfulRescale`, `FailedGetScale`, ..."""

    async def sync(self, session: aiohttp.ClientSession) -> int | None:
        """One reconcile; returns the replicas written, or None when nothing was written."""
        async with session.get(self.scale_url) as response:
            if response.status != 200:
                self.events.append(f"FailedGetScale {response.status}")
                return None
            scale: dict[str, Any] = await response.json()
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        if not (scale.get("status") or {}).get("selector"):
            self.events.append("InvalidSelector selector is required")
            return None
        if current == 0:
            self.events.append("ScalingDisabled")  # the HPA leaves a target scaled to zero alone
            return None
        value = await self.read_metric()
        if value is None:
            self.events.append("FailedGetExternalMetric")
            return None
        now = self.clock()
        ratio = value / (self.target_average_value * current)
        proposal = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(value / self.target_average_value)
        self.recommendations.append((now, proposal))
        self.recommendations = [(t, r) for t, r in self.recommendations if t > now - self.down_window_s]
        desired = proposal
        if proposal < current:
            desired = min(current, max(r for _, r in self.recommendations))
            recent = sum(n for t, n in self.scale_downs if t > now - self.down_period_s)
            desired = max(desired, current - max(0, self.down_pods - recent))
        else:
            desired = min(desired, max(current * 2, current + 4))
        desired = max(self.min_replicas, min(self.max_replicas, desired))
        if desired == current:
            return None
        scale["spec"] = {"replicas": desired}
        async with session.put(self.scale_url, json=scale) as response:
            if response.status != 200:
                self.events.append(f"FailedRescale {response.status}")
                return None
        if desired < current:
            self.scale_downs.append((now, current - desired))
        self.events.append(f"SuccessfulRescale {current} -> {desired}")
        return desired
