"""The GPUs NVML gives no busy ratio for good, and how the sampler says so: MIG devices (NVML measures no
utilization per MIG device), and whole GPUs that have refused their utilization NOT_SUPPORTED since their first read
for `UNMEASURED_AFTER_S` (before that a failure: a GPU being reset refuses it too). Beside a device that gives a busy
ratio they are how the node is, said once at INFO; with none, a failure the collector reports.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from exporter import nvml_devices, nvml_errors
from exporter.gpu_problems import MIG_HINT
from exporter.gpu_readings import GpuReading

__all__ = ["UNMEASURED_AFTER_S", "UNMEASURED_HINT", "UnmeasuredGpus"]

log = logging.getLogger("exporter.collectors.gpu")
"""The GPU collector's logger, the one operators filter on."""

UNMEASURED_AFTER_S: Final = 300.0
"""How long a whole GPU refuses its utilization (NOT_SUPPORTED), from its first read in this process with no answer
since, before it is taken as one NVML does not measure (its busy left out, the pod's read from its other devices,
said once at INFO). Until then it is a failure, the pod's GPU signal missing: an H100 being reset, or a driver
still coming up, refuses it too, and taken at once for one NVML does not measure, a busy GPU 0 (95%) beside an idle
GPU 1 (5%) was left out with `collector_success` 1, the pod read at 0.05 for 0.5, at each exporter start. A reset or
a driver coming up answers within it; a GPU NVML does not measure costs its runtime 5 minutes of held scale-down at
each exporter start. An answer ends it for the process: a refusal after one is a failure for as long."""
UNMEASURED_HINT = (
    "read GPU busy from NVIDIA's DCGM exporter instead, where it measures this GPU (the adapter's "
    "--gpu-source=dcgm), and turn this collector off (EXPORTER_NO_GPU=true, --no-gpu)"
)
"""Said where the only GPUs of a pod are ones NVML does not measure: the adapter has no busy ratio to scale it on."""


class UnmeasuredGpus:
    """What the sampler knows of the GPUs' busy ratios over the process: which whole GPUs have given one, since when
    the others have been refused it, and which devices without one were last said (`problems`)."""

    def __init__(self) -> None:
        """No GPU measured, refused or said yet."""
        self._unmeasured_said: tuple[str, ...] = ()  # the devices last said to have no busy ratio beside GPUs that do
        self._measured: set[str] = set()
        """Whole GPUs (UUID) that have given a busy ratio: one refused its utilization after that may be as busy as
        ever, a failure; one refused it from its first read is one NVML does not measure (`never_measured`)."""
        self._refusing_since: dict[str, float] = {}
        """Whole GPUs (UUID) never measured: when (monotonic) NVML first refused their utilization NOT_SUPPORTED, the
        start of their `UNMEASURED_AFTER_S`."""

    def measured(self, uuid: str) -> None:
        """A device gave a busy ratio: a refusal from now on is a failure for the process."""
        self._measured.add(uuid)

    def keep_only(self, chosen: Iterable[str]) -> None:
        """Forget the refusals of the devices not chosen (NVML re-initialised without them)."""
        kept = set(chosen)
        self._refusing_since = {uuid: since for uuid, since in self._refusing_since.items() if uuid in kept}

    def never_measured(self, device: nvml_devices.Device, refusal: nvml_errors.NotSupported, now: float) -> bool:
        """Whether a whole GPU's refused utilization is one NVML does not measure: NOT_SUPPORTED (not this container's
        NO_PERMISSION, which may change) on a GPU that has given no busy ratio since the exporter started, its first
        refusal `UNMEASURED_AFTER_S` ago. Sooner, it may be a busy GPU being reset (`refused_utilization`)."""
        if isinstance(refusal, nvml_errors.NotPermitted) or device.uuid in self._measured:
            return False
        since = self._refusing_since.setdefault(device.uuid, now)
        return now - since >= UNMEASURED_AFTER_S

    def refused_utilization(self, device: nvml_devices.Device, refusal: nvml_errors.NotSupported) -> str:
        """The failure of a whole GPU refused its utilization: one that answered before (as busy as ever, perhaps),
        one refused NO_PERMISSION, and one on probation, which the line says is taken as one NVML does not measure
        if it goes on refusing: an operator read only that it failed, and then, with success, that it was left out."""
        problem = f"no utilization for GPU {device.label} {device.uuid}: {refusal}"
        if device.uuid in self._refusing_since and device.uuid not in self._measured:
            problem += (f" (a GPU being reset, or a driver coming up, refuses it a while; taken as unmeasured after "
                        f"{_minutes(UNMEASURED_AFTER_S)} if it never answers)")
        return problem

    def problems(self, unmeasured: Sequence[tuple[nvml_devices.Device, nvml_errors.NotSupported]],
                 readings: Sequence[GpuReading]) -> list[str]:
        """The devices NVML gives no busy ratio (MIG devices, whole GPUs it never measured past their probation,
        `UNMEASURED_AFTER_S`) as problems, or none where another device gives one.

        NVML measures no utilization per MIG device, nor on a GPU that does not support the query. Beside a device
        that has a busy ratio, that is how the node is, not a failure: failing the collector for it kept
        `last_success_timestamp{collector="gpu"}` from ever advancing, so the adapter read the pod's other GPUs as
        missing too and held its runtime's scale-down for good. Said once in the log instead, naming exactly what
        is served. With no busy ratio at all, the adapter has nothing to scale the pod on, whatever the collector
        says: a failure, so that `ModelMeshExporterGpuNotVisible` sends the operator to DCGM."""
        if not unmeasured:
            self._unmeasured_said = ()  # none now (switched out of MIG mode): said again if they come back
            return []
        mig = [f"GPU {device.label} {device.uuid}" for device, _ in unmeasured if device.is_mig]
        whole = [(f"GPU {device.label} {device.uuid}", refusal) for device, refusal in unmeasured if not device.is_mig]
        busy_from = [reading.label for reading in readings if reading.busy_ratio is not None]
        if not busy_from:
            problems = [f"no busy ratio: NVML does not measure the utilization of {gpu} ({refusal}, at every read "
                        f"for over {_minutes(UNMEASURED_AFTER_S)}); {UNMEASURED_HINT}" for gpu, refusal in whole]
            if mig:
                problems.append(f"no busy ratio: MIG devices ({', '.join(mig)}) have none and no other device "
                                f"gives one; {MIG_HINT}")
            return problems
        said = tuple(gpu for gpu, _ in whole) + tuple(mig)
        if said != self._unmeasured_said:
            self._unmeasured_said = said
            why = [f"{gpu} has no busy ratio: NVML has refused its utilization ever since its first read, over "
                   f"{_minutes(UNMEASURED_AFTER_S)} ({refusal}): taken as a GPU NVML does not measure, and asked again "
                   "at every read (a busy ratio it gives is served; a refusal after one is a failure)"
                   for gpu, refusal in whole]
            if mig:
                why.append(f"MIG devices {', '.join(mig)} have no busy ratio: NVML measures no utilization per MIG "
                           "device")
            log.info("%s; this pod's busy ratio is read from GPU %s alone%s", "; ".join(why),
                     ", GPU ".join(busy_from), _without_busy(readings))
        return []


def _minutes(seconds: float) -> str:
    """A duration as the log says it: "5 min"."""
    return f"{seconds / 60:g} min"


def _without_busy(readings: Sequence[GpuReading]) -> str:
    """What is served of the devices without a busy ratio, for the line that says busy is read from the others:
    "this pod's busy ratio is read from GPU 1 alone" left GPU 0's memory series unsaid."""
    partial = [f"GPU {r.label}" for r in readings if r.busy_ratio is None and r.memory_total_bytes is not None]
    if not partial:
        return ""
    return f" ({', '.join(partial)} {'has its' if len(partial) == 1 else 'have their'} memory alone)"


