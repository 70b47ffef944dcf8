"""The HPA behavior shipped in `manifests/examples/hpa-*.yaml`, for the simulator and the demo.

Kept here as data because an installed package has no `manifests/` directory; a test checks that every
shipped HPA manifest says exactly this, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Final

from autoscaler.simulation.hpa import DEFAULT_SCALE_UP, Behavior, ScalingPolicy, ScalingRules

SHIPPED_BEHAVIOR: Final = Behavior(
    scale_up=DEFAULT_SCALE_UP,
    scale_down=ScalingRules(600, "Min", (ScalingPolicy("Pods", 1, 300),)),
)
