"""How large a synthetic trace `simulate --synthetic` makes: limits a user can read in --help, checked before
the trace is made. Free of numpy, so the command line states them without importing it."""

from __future__ import annotations

from typing import Final

from autoscaler.simulation.trace_error import TraceError

MAX_SYNTHETIC_MODELS: Final = 100_000
MAX_SYNTHETIC_HOURS: Final = 8_760
MAX_MODEL_HOURS: Final = 500_000
"""The synthetic trace is made as a grid of a cell per model and minute, some 40 bytes each: 500,000
model-hours (a day of 20,833 models) is 30 million cells, about 1 GB and 7 s to make (measured). A
billion hours of 5 models died of numpy's _ArrayMemoryError (a traceback), a hundred million models ran
without a word for as long as one waited."""
MAX_SYNTHETIC_RPS: Final = 1_000_000
"""Past this, the requests of a minute overflow numpy's Poisson draw ("lam value too large")."""


def check_synthetic_size(models: int, hours: float, mean_rps: float) -> None:
    """Refuse a synthetic trace too large to make, naming the flag and its limit (docs/configuration.md)."""
    if models < 1 or hours <= 0 or mean_rps <= 0:
        raise TraceError("--models, --hours and the request rate must be positive")
    if models > MAX_SYNTHETIC_MODELS:
        too_many = f"--models {models:,} is more than the synthetic trace makes ({MAX_SYNTHETIC_MODELS:,})"
    elif hours > MAX_SYNTHETIC_HOURS:
        too_many = f"--hours {hours:g} is more than the synthetic trace makes ({MAX_SYNTHETIC_HOURS:,}, a year)"
    elif models * hours > MAX_MODEL_HOURS:
        too_many = (f"--models {models:,} x --hours {hours:g} is {models * hours:,.0f} model-hours, more than the "
                    f"synthetic trace makes ({MAX_MODEL_HOURS:,}: a day of {MAX_MODEL_HOURS // 24:,} models, a week "
                    f"of {MAX_MODEL_HOURS // 168:,})")
    elif mean_rps > MAX_SYNTHETIC_RPS:
        too_many = f"--rps {mean_rps:,.15g} is more than the synthetic trace makes ({MAX_SYNTHETIC_RPS:,} requests/s)"
    else:
        return
    raise TraceError(f"{too_many}: give a smaller one")
