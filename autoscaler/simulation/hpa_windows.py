"""The HPA's stabilization windows as the advice changes them: one field of the user's `--hpa-behavior`, the rest
of their behavior kept, and that behavior written back as a file the compare command passes.

The advice to lower the scale-down window was measured, and its command run, with the shipped behavior in place of
the user's: their scale-up window went too (a reviewer's 600 s one), so the figures were those of two changes, the
advice named one, and set as advised (only the scale-down window) pod-hours came out 13.9 where it said 13.3.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Final

from autoscaler.simulation.hpa_spec import DEFAULT_BEHAVIOR, DOWNSCALE_STABILIZATION_S, Behavior, ScalingRules

DOWN_WINDOW: Final = "behavior.scaleDown.stabilizationWindowSeconds"
UP_WINDOW: Final = "behavior.scaleUp.stabilizationWindowSeconds"
WINDOWS: Final = (UP_WINDOW, DOWN_WINDOW)
"""The settings of the advice that are a field of the HPA's behavior, not a key of the policy file."""


def window_of(behavior: Behavior | None, setting: str) -> int:
    """The window `setting` names in `behavior`; an HPA without behavior waits the controller's own scale-down
    window (`--horizontal-pod-autoscaler-downscale-stabilization`, 300 s) and none before a scale-up."""
    if behavior is None:
        return DOWNSCALE_STABILIZATION_S if setting == DOWN_WINDOW else 0
    return (behavior.scale_down if setting == DOWN_WINDOW else behavior.scale_up).stabilization_window_s


def with_window(behavior: Behavior | None, setting: str, seconds: int) -> Behavior:
    """`behavior` with the window `setting` names at `seconds`, every other field as it was. An HPA without
    behavior given one with only that field set takes the API server's defaults for the rest (DEFAULT_BEHAVIOR)."""
    base = DEFAULT_BEHAVIOR if behavior is None else behavior
    if setting == DOWN_WINDOW:
        return replace(base, scale_down=replace(base.scale_down, stabilization_window_s=seconds))
    return replace(base, scale_up=replace(base.scale_up, stabilization_window_s=seconds))


def behavior_yaml(behavior: Behavior) -> str:
    """`printf`'s format for a file `--hpa-behavior` reads back as `behavior`: a bare `behavior:` mapping with
    every field written out (none left to a default that could differ from what this run read)."""
    lines = ["behavior:"]
    for name, rules in (("scaleUp", behavior.scale_up), ("scaleDown", behavior.scale_down)):
        lines += [f"  {name}:", *_rules(rules)]
    return "\\n".join(lines) + "\\n"


def _rules(rules: ScalingRules) -> list[str]:
    lines = [f"    stabilizationWindowSeconds: {rules.stabilization_window_s}",
             f"    selectPolicy: {rules.select_policy}", "    policies:"]
    lines += [f"    - {{type: {p.type}, value: {p.value}, periodSeconds: {p.period_s}}}" for p in rules.policies]
    if rules.tolerance is not None:  # a quantity, quoted: read back exactly (a YAML float went through binary)
        lines.append(f"    tolerance: \"{Decimal(repr(rules.tolerance)):f}\"")
    return lines
