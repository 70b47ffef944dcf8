"""The shapes of synthetic traces the shipped defaults are tuned on (steady, diurnal, bursty, heavy-tailed,
churn, and all of them mixed). Plain data, free of numpy, so the command line can list them cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Shape:
    """What the generator draws: each knob 0 turns that feature off."""

    zipf_s: float = 1.1  # popularity of the model of rank k is proportional to 1 / k^s
    daily_amplitude: float = 0.6  # total rate swings by ±this fraction over 24 h (peak in the afternoon)
    bursts_per_hour: float = 2.0  # a random model suddenly gets `burst_share` of the mean rate
    burst_share: float = 0.25
    burst_minutes: tuple[float, float] = (3.0, 12.0)
    churn: float = 0.2  # fraction of models that appear and go quiet within the trace


SHAPE_PRESETS: Final[dict[str, Shape]] = {
    "mixed": Shape(),
    "steady": Shape(daily_amplitude=0.0, bursts_per_hour=0.0, churn=0.0),
    "diurnal": Shape(daily_amplitude=0.7, bursts_per_hour=0.0, churn=0.0),
    "bursty": Shape(daily_amplitude=0.0, bursts_per_hour=6.0, burst_share=0.4, churn=0.0),
    "heavy-tailed": Shape(zipf_s=1.6, daily_amplitude=0.3, bursts_per_hour=0.0, churn=0.0),
    "churn": Shape(daily_amplitude=0.3, bursts_per_hour=0.0, churn=0.8),
}


SHAPES: Final = tuple(SHAPE_PRESETS)
