"""The NVML errors the exporter sees, whatever pynvml raised: `nvml` turns every `pynvml.NVMLError` (and an `OSError`
from loading the library) into one of these, with the NVML error chained as `__cause__` and its code kept:

    NvmlError            any NVML failure; `.code` is the NVML return code (None when there was none)
    ├── NvmlUnavailable  NVML cannot be used at all: library missing, driver not loaded, init failed (any
    │                    code, NO_PERMISSION included), not initialised. Retry `NvmlSession.open()` later.
    ├── GpuLost          one GPU stopped answering (GPU_IS_LOST, RESET_REQUIRED, GPU_NOT_FOUND).
    │                    Other GPUs may still work; a new session re-enumerates.
    └── NotSupported     this device or driver lacks the query (NOT_SUPPORTED, FUNCTION_NOT_FOUND), e.g.
        │                utilization of a MIG device. Not an outage: use a fallback or leave the series out.
        └── NotPermitted this process may not make this query on this device (NO_PERMISSION from a device
                         call, e.g. nvmlDeviceGetMemoryInfo in a container on a MIG GPU): the same for the
                         caller as a query the device lacks; NVML and the other devices work.

`codes_said` reads the codes back out of a problem's text.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["GpuLost", "NotPermitted", "NotSupported", "NvmlError", "NvmlUnavailable", "codes_said"]


class NvmlError(Exception):
    """An NVML call failed; `code` is NVML's return code, None when the failure had none (an OSError)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class NvmlUnavailable(NvmlError):
    """NVML cannot be used at all right now (no library, no driver, init failed): no GPU is visible."""


class GpuLost(NvmlError):
    """A GPU stopped answering; the others may still work."""


class NotSupported(NvmlError):
    """The device or driver does not offer this query; use a fallback or leave the value out."""


class NotPermitted(NotSupported):
    """NVML refuses this process this query on this device (NO_PERMISSION from a device call).

    Not NvmlUnavailable: that dropped every GPU and re-initialised NVML, only to be refused again, so one
    device's memory query (refused in containers on MIG GPUs) kept the whole pod's GPU signal stale for good.
    A refused nvmlInit is still NvmlUnavailable (`NvmlSession.open`)."""


_CODE_SAID: Final = re.compile(r"\(NVML code (\d+)\)")


def codes_said(text: str) -> frozenset[str]:
    """The NVML error codes a problem's text names, as `nvml._translate` writes each error ("NVML code 9"): what failed
    beneath the GPU collector's one reason, `nvml` (CollectorHealth's `causes`)."""
    return frozenset(f"NVML code {code}" for code in _CODE_SAID.findall(text))
