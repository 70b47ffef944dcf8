"""The HPA behavior shipped in `manifests/examples/hpa-*.yaml`, for the simulator and the demo.

Kept here as data because an installed package has no `manifests/` directory; a test checks that every
shipped HPA manifest says exactly this, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Final

from autoscaler.simulation.hpa_spec import DEFAULT_SCALE_UP, Behavior, ScalingPolicy, ScalingRules

SHIPPED_BEHAVIOR: Final = Behavior(
    scale_up=DEFAULT_SCALE_UP,
    # One slow-down rail, the adapter's (scale_down_tau_s): chosen with bench/simulate_shapes.py (README).
    scale_down=ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 15),)),
)
