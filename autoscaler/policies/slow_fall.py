"""Why a served replica count is above its raw recommendation while nothing holds it: the slow scale-down.

The served `modelmesh_desired_replicas` is the smoothed recommendation rounded up (`smoothing`): after the load
falls from 4 pods' worth to 3, /debug reads `value 4, raw 3, held {}` for minutes (`tau · ln(gap / settle)`:
about 11.5 minutes for one pod at the default 300 s). `held` is empty because nothing holds the value: it falls,
slowly, by design. Without a word in /debug an operator watching a runtime go 3 -> 4 -> 3 under a load near a
boundary could not tell that from something else writing the replicas, nor how long the 4 lasts.

`slow_fall` says it: the smoothed value, `scale_down_tau_s`, when the served value next steps down a pod and when it
reaches raw, if raw stays.
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
    # The served value is the smoothed one rounded up, so it steps down a pod whenever the gap decays past the
    # next whole pod above raw: the next step comes long before the fall's end (6 -> 5 after 71 s of a 1092 s fall
    # to 2 at 300 s), and "served 6 until 1092 s" had an engineer lower scale_down_tau_s for no reason.
    next_gap = served.value - 1.0 - served.raw
    next_step = (left if next_gap <= DESIRED_REPLICAS_SETTLE else
                 max(0.0, tau_s * math.log(gap / next_gap) - max(0.0, at - state.updated_at)))
    then = f"then {served.value - 1:g}" + (", a pod at a time" if next_gap > DESIRED_REPLICAS_SETTLE else "")
    entry: dict[str, float | str] = {
        "smoothed": state.value,
        "scale_down_tau_s": tau_s,
        "served_next_step_in_s": next_step,
        "served_reaches_raw_in_s": left,
        "why": (f"falling slowly to raw {served.raw:g} (scale_down_tau_s {tau_s:g} s, the adapter's slow "
                f"scale-down; smoothed {state.value:.3g}, served rounded up): served {served.value:g} for about "
                f"{next_step:.0f} s more, {then}; raw {served.raw:g} in about {left:.0f} s from this refresh, if "
                f"raw stays; nothing holds it"),
    }
    return dataclasses.replace(view, falling={_DESIRED.value: entry})
