"""Why a served replica count is above its raw recommendation while nothing holds it: the slow scale-down.

The served `modelmesh_desired_replicas` is the smoothed recommendation rounded up (`smoothing`): after the load
falls from 4 pods' worth to 3, /debug reads `value 4, raw 3, held {}` for minutes (`tau · ln(gap / settle)`:
about 11.5 minutes for one pod at the default 300 s). `held` is empty because nothing holds the value: it falls,
slowly, by design. Without a word in /debug an operator watching a runtime go 3 -> 4 -> 3 under a load near a
boundary could not tell that from something else writing the replicas, nor how long the 4 lasts.

`slow_fall` says it: the smoothed value, `scale_down_tau_s`, and when the served value reaches raw if raw stays.
Pure, from the view, the runtime's smoothing state and its policy; the refresher adds it to the view
(`RuntimeView.falling`) only for a runtime in the middle of a fall, so the usual refresh pays one comparison.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Final

from autoscaler.model import RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.smoothing import DESIRED_REPLICAS_SETTLE, SmoothState

_DESIRED: Final = ServedMetric.DESIRED_REPLICAS


def slow_fall(view: RuntimeView, state: SmoothState | None, tau_s: float, at: float) -> RuntimeView:
    """`view` with its replica count's slow fall in `falling`, where it has one: the served value above raw and
    nothing in `held` for it (a value held by missing data or by the deletion costs is not falling, `held` says
    why). `state` is the runtime's smoothing state of the replica count as this refresh left it, stepped at `at`
    on the running clock; `tau_s` its `scale_down_tau_s`."""
    served = view.values.get(_DESIRED)
    if (served is None or served.value is None or served.raw is None or state is None
            or not served.value > served.raw or _DESIRED.value in view.held or tau_s <= 0.0):
        return view
    gap = state.value - served.raw
    if gap <= DESIRED_REPLICAS_SETTLE:  # (landed: the next step serves raw)
        return view
    # The served value reaches raw when the gap decays to the settle band (`smoothing.smooth`), counted from the
    # state's last step (this refresh's, on the running clock).
    left = tau_s * math.log(gap / DESIRED_REPLICAS_SETTLE) - max(0.0, at - state.updated_at)
    left = max(0.0, left)
    entry: dict[str, float | str] = {
        "smoothed": state.value,
        "scale_down_tau_s": tau_s,
        "served_reaches_raw_in_s": left,
        "why": (f"falling slowly to raw {served.raw:g} (scale_down_tau_s {tau_s:g} s, the adapter's slow "
                f"scale-down; smoothed {state.value:.3g}, served rounded up): served {served.value:g} until about "
                f"{left:.0f} s from this refresh, if raw stays {served.raw:g}; nothing holds it"),
    }
    return dataclasses.replace(view, falling={_DESIRED.value: entry})
