"""What one NVML pass hands the GPU collector: a reading per GPU or MIG device and the pass's outcome, made on the
sampler's worker thread and applied on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter import names

__all__ = ["GpuReading", "PassOutcome"]


@dataclass(frozen=True)
class GpuReading:
    """What one pass learnt about one GPU or MIG device; None where NVML could not say."""

    label: str
    uuid: str
    busy_ratio: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    as_of: float | None = None
    """Unix time its busy ratio's window ends (when NVML's samples were read); None without a busy ratio."""


@dataclass(frozen=True)
class PassOutcome:
    """One pass's result, applied on the caller's thread: readings to serve and what went wrong."""

    readings: tuple[GpuReading, ...]
    problems: tuple[str, ...]
    duration_s: float | None = None
    """How long the NVML work took (health's collector_duration_seconds)."""
    as_of: float | None = None
    """The time the busy ratios describe, the oldest of their windows' ends: published as the collector's
    success time, not the pass's end, which a hung NVML call puts seconds later. None: no busy ratio."""
    reason: str = names.REASON_NVML
