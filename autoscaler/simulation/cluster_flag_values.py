"""The ranges of `simulate`'s cluster flags: its durations (`--tick`, `--startup-delay`, `--load-time`,
`--min-churn-age`), each read by `exporter.flag_values.seconds_within` as `serve`'s and the exporter's durations are,
and its other numbers (`--slo-queue-ms`, `--pod-rps`, `--cache-models`), read by the same range check in their own
units: apart from the CLI, which only wires the flags, so that the bounds and why they are what they are stay in one
place (the bench scripts import them too).
"""

from __future__ import annotations

from typing import Final

from autoscaler.policies.policy_values import TARGET_QUEUE_DELAY_RANGE_S
from exporter.flag_values import number_within, seconds_or_off, seconds_within, whole_number_within

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


SLO_QUEUE_RANGE_MS: Final = (1.0, TARGET_QUEUE_DELAY_RANGE_S[1] * 1000.0)
"""The queueing SLOs taken: `--slo-queue-ms 1e300` ran a report in which no queue ever delayed a request, and
1e-300 one in which every request that queued at all was delayed, with nothing said. From a millisecond, the flag's
unit; up to ten minutes, the longest queue delay the adapter's policy takes as its target (`target_queue_delay_s`):
a request queued longer has long timed out at its client."""

slo_queue_ms = number_within(*SLO_QUEUE_RANGE_MS, "ms")
"""Milliseconds a request may queue before it counts as delayed, within `SLO_QUEUE_RANGE_MS`."""


POD_RPS_RANGE: Final = (0.001, 100_000.0)
"""The pod capacities taken: `--pod-rps 1e300` ran, its report at "0.00x oracle" on "1e+300 req/s per pod", and
1e-300 was refused with a pod count of 300 digits. From a request every 1000 s (about 17 minutes, longer than any
inference request takes) to 100,000 a second, far past what one model-server pod serves: a value outside is a rate
in the wrong unit (per minute, per day), not a pod."""

pod_rps = number_within(*POD_RPS_RANGE, "req/s")
"""Requests per second one pod serves at 100% busy, within `POD_RPS_RANGE`."""


CACHE_MODELS_RANGE: Final = (1, 1_000_000)
"""The cache sizes taken: `--cache-models 1000000000000000000000` ran and printed that many "model copies per pod",
and a number of 400 digits stopped with an OverflowError traceback (no float holds it). A million copies is ten
times the most models the synthetic trace makes (100,000) and some twenty times a day of Azure Functions (46,000):
every pod holds every model, which is what a larger value would mean."""


def cache_models(value: str) -> int:
    """Model copies one pod holds, within `CACHE_MODELS_RANGE`."""
    return whole_number_within(value, *CACHE_MODELS_RANGE, f"{CACHE_MODELS_RANGE[0]} to {CACHE_MODELS_RANGE[1]}")
