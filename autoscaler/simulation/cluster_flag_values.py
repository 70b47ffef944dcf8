"""The ranges of `simulate`'s cluster durations (`--tick`, `--startup-delay`, `--load-time`, `--min-churn-age`),
each read by `exporter.flag_values.seconds_within` as `serve`'s and the exporter's durations are: apart from the CLI,
which only wires the flags, so that the bounds and why they are what they are stay in one place.
"""

from __future__ import annotations

from typing import Final

from exporter.flag_values import seconds_or_off, seconds_within

TICK_RANGE_S: Final = (0.1, 600.0)
"""The simulation steps taken: `--tick 1e300` and `--tick 1e-300` stopped with an OverflowError traceback (a step
count, or a window of steps, that no int holds). Up to ten minutes, the longest trace interval read; from a tenth
of a second, the shortest interval of the adapter and the exporter, at which a day is 864,000 steps already."""

tick = seconds_within(*TICK_RANGE_S)
"""Seconds of one simulation step, within `TICK_RANGE_S`."""


POD_WAIT_RANGE_S: Final = (0.1, 3600.0)
"""The startup delays and model load times taken: 1e300 was taken, and the day ran with pods that never got Ready
or models that never loaded, with nothing said. An hour is far past any pod start or model load a cluster waits
for (modelmesh-serving's load timeout is 90 s)."""

pod_wait = seconds_within(*POD_WAIT_RANGE_S)
"""Seconds until a new pod is Ready, or to load a model, within `POD_WAIT_RANGE_S`."""


MIN_CHURN_AGE_RANGE_S: Final = (0.0, 86_400.0)
"""The churn limits taken: `--min-churn-age 1e300` was taken, and a full pod refused every load for the whole run.
A day is far past ModelMesh's own (10 x max(3 s, a third of the load timeout): 300 s for modelmesh-serving's 90 s);
0 turns it off."""

min_churn_age = seconds_within(*MIN_CHURN_AGE_RANGE_S, read=seconds_or_off)
"""Seconds of ModelMesh's churn limit, within `MIN_CHURN_AGE_RANGE_S` (0: never)."""
