"""A GPU's memory use, where NVML reports it: a device whose memory query NVML refuses is said once and left out of
the memory series (its busy ratio is still read), and one refused for good is asked again only every
`MEMORY_ASKED_AGAIN_S`, not at every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

from exporter import nvml, nvml_devices, nvml_errors
from exporter.gpu_busy import Busy
from exporter.nvml_refusals import RefusedQueries

__all__ = ["MEMORY_ASKED_AGAIN_S", "GpuMemoryReads"]

log = logging.getLogger("exporter.collectors.gpu")
"""The GPU collector's logger, the one operators filter on."""

MEMORY_ASKED_AGAIN_S: Final = 60.0
"""How often a device whose memory query NVML refused for good is asked it again: a MIG device refused it
(NO_PERMISSION in a container on a MIG GPU), a whole GPU that lacks it (NOT_SUPPORTED on unified-memory parts such as
Grace Hopper and GB10). One failing call a minute, not one a pass; memory given back is read within a minute."""


class GpuMemoryReads:
    """The memory reads of the sampler's devices, with the refusals it remembers; used under the sampler's lock."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        """`monotonic` times the refusals' `MEMORY_ASKED_AGAIN_S`."""
        self._without_memory: set[str] = set()  # GPUs whose memory query is unsupported, logged once each
        self._memory_refused = RefusedQueries(MEMORY_ASKED_AGAIN_S, monotonic)  # for good: `_refused_for_good`

    def keep_only(self, chosen: Iterable[str]) -> None:
        """Forget the refusals of the devices not chosen (NVML re-initialised without them)."""
        self._memory_refused.keep_only(chosen)

    def read(self, session: nvml.NvmlSession, device: nvml_devices.Device,
             busy: Busy | None) -> nvml_devices.MemoryInfo | None:
        """The device's memory, None where unsupported (said once per device). A refusal for good stands for
        `MEMORY_ASKED_AGAIN_S` without asking: a unified-memory GPU was asked at every pass, a call that could only
        fail, beside its utilization (which stays asked at every pass: its busy ratio is wanted the pass it answers)."""
        if self._memory_refused.standing(device.uuid) is not None:
            return None
        try:
            return session.memory(device)
        except nvml_errors.NotSupported as error:
            if _refused_for_good(device, error):
                self._memory_refused.remember(device.uuid, error)
            if device.uuid not in self._without_memory:
                self._without_memory.add(device.uuid)
                log.info("GPU %s %s reports no memory use (%s): its memory series are left out; %s", device.label,
                         device.uuid, error, _busy_beside_memory(busy))
            return None


def _refused_for_good(device: nvml_devices.Device, refusal: nvml_errors.NotSupported) -> bool:
    """Whether NVML's refusal of a device's memory query will stand: a MIG device's, whatever the code (NVML refuses
    one's memory in a container on a MIG GPU for good), and a whole GPU's that lacks the query (NOT_SUPPORTED). A
    whole GPU refused it NO_PERMISSION is this container's standing, which may change: it is asked at every pass."""
    return device.is_mig or not isinstance(refusal, nvml_errors.NotPermitted)


def _busy_beside_memory(busy: Busy | None) -> str:
    """What becomes of a device's busy ratio, said with its memory left out: "read as usual" was said of a GPU that
    refused every query (NOT_SUPPORTED, NO_PERMISSION for a while) beside the collector's failure over its busy."""
    return "its busy ratio is read as usual" if busy is not None else "it has no busy ratio either"
