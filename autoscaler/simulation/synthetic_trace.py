"""The synthetic trace generator of `simulate --synthetic`.

The generator draws the shapes the shipped defaults are tuned on (docs/design.md): Zipf popularity (a few hot
models, a long tail), a daily cycle, bursts on random models (a cold model turning hot is exactly the skew
a plain mean hides), and churn (models that appear and go quiet). It is seeded, so a run repeats exactly.
"""

from __future__ import annotations

import numpy as np

from autoscaler.simulation.shapes import SHAPE_PRESETS, Shape
from autoscaler.simulation.synthetic_size import check_synthetic_size
from autoscaler.simulation.trace import Trace


def synthetic(models: int = 500, hours: float = 24.0, mean_rps: float = 150.0, shape: str | Shape = "mixed",
              seed: int = 0, interval_s: float = 60.0) -> Trace:
    """A seeded synthetic trace; `mean_rps` is the mean total request rate before bursts."""
    check_synthetic_size(models, hours, mean_rps)
    spec = SHAPE_PRESETS[shape] if isinstance(shape, str) else shape
    rng = np.random.default_rng(seed)
    steps = max(1, round(hours * 3600 / interval_s))
    t = np.arange(steps) * interval_s
    weight = 1.0 / np.arange(1, models + 1) ** spec.zipf_s
    rng.shuffle(weight)
    alive = np.ones((steps, models), dtype=bool)
    churners = rng.random(models) < spec.churn
    duration = steps * interval_s
    for m in np.flatnonzero(churners):
        begin = rng.uniform(-0.5, 1.0) * duration
        end = begin + rng.exponential(0.4 * duration)
        alive[:, m] = (t >= begin) & (t < end)
    share = alive * weight
    share /= np.maximum(share.sum(axis=1, keepdims=True), 1e-12)
    cycle = 1.0 + spec.daily_amplitude * np.sin(2 * np.pi * (t / 86400.0 - 0.375))
    rate = share * (mean_rps * cycle)[:, None]
    for _ in range(rng.poisson(spec.bursts_per_hour * hours)):
        burst_model = int(rng.integers(models))
        first = int(rng.integers(steps))
        length = max(1, round(rng.uniform(*spec.burst_minutes) * 60 / interval_s))
        rate[first:first + length, burst_model] += spec.burst_share * mean_rps
    counts = rng.poisson(rate * interval_s)
    slot, model = np.nonzero(counts)
    return Trace(tuple(f"model-{i:04d}" for i in range(models)), 0.0, interval_s, steps,
                 slot.astype(np.int64), model.astype(np.int64), counts[slot, model].astype(np.float64))
