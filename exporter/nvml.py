"""The one module that calls `pynvml`: GPU enumeration, utilization, memory, and NVML's errors made ours.

Nothing else in the project imports `pynvml`. Every `pynvml.NVMLError` (and an `OSError` from loading the
library) leaves this module as one of `nvml_errors` (`NvmlError` and its kinds), with the NVML error chained as
`__cause__` and its code kept; the devices it enumerates are `nvml_devices`' plain values.

Two NVML answers are not errors here: NOT_FOUND from `nvmlDeviceGetSamples` means "no sample newer than the
timestamp you gave" and INSUFFICIENT_SIZE means more samples arrived between pynvml's sizing call and its
fetch; both return no samples, and the next call (same `since_us`) picks them up.

MIG: a GPU in MIG mode reports no utilization, and what a workload owns is a MIG device, so enumeration
returns the MIG devices of such a GPU (labelled `"<gpu>/<mig>"`) instead of the GPU itself; `mig_enabled` tells
a caller whether a GPU's MIG mode has changed since, and `mig_devices` which MIG devices a GPU in MIG mode has now
(either changed: enumerate again). NVML keeps one
process-wide state, so sessions are cheap wrappers: `nvmlInit` and `nvmlShutdown` are reference counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final

import pynvml

from exporter.nvml_devices import Device, Inventory, MemoryInfo, UtilizationSample
from exporter.nvml_errors import GpuLost, NotPermitted, NotSupported, NvmlError, NvmlUnavailable

LIBRARY_NOT_FOUND: Final[int] = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
DRIVER_NOT_LOADED: Final[int] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
LIB_RM_VERSION_MISMATCH: Final[int] = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
"""NvmlUnavailable codes that mean this container has no NVIDIA driver, and the one that means its NVIDIA library
and the node's loaded driver differ in version (for callers that do not import pynvml)."""
_UNAVAILABLE_CODES: Final = frozenset({
    pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    pynvml.NVML_ERROR_OPERATING_SYSTEM,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
})
_LOST_CODES: Final = frozenset({
    pynvml.NVML_ERROR_GPU_IS_LOST,
    pynvml.NVML_ERROR_RESET_REQUIRED,
    pynvml.NVML_ERROR_GPU_NOT_FOUND,
})
_NOT_SUPPORTED_CODES: Final = frozenset({
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
})
# nvmlDeviceGetSamples: "nothing newer than lastSeenTimeStamp" and "more arrived while pynvml was sizing".
_NO_NEW_SAMPLE_CODES: Final = frozenset({
    pynvml.NVML_ERROR_NOT_FOUND,
    pynvml.NVML_ERROR_INSUFFICIENT_SIZE,
})

# Which member of the nvmlValue_t union holds a sample, by the value type NVML reports.
_VALUE_FIELDS: Final = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def _translate(error: Exception, operation: str) -> NvmlError:
    """Map a pynvml error (or OSError) to our hierarchy, keeping the code; the caller chains the cause."""
    if isinstance(error, pynvml.NVMLError):
        code = int(error.value)
        message = f"{operation}: {error} (NVML code {code})"
        if code in _LOST_CODES:
            return GpuLost(message, code)
        if code in _NOT_SUPPORTED_CODES:
            return NotSupported(message, code)
        if code == pynvml.NVML_ERROR_NO_PERMISSION:
            return NotPermitted(message, code)
        if code in _UNAVAILABLE_CODES:
            return NvmlUnavailable(message, code)
        return NvmlError(message, code)
    return NvmlUnavailable(f"{operation}: {error}")


@contextmanager
def _calling(operation: str) -> Iterator[None]:
    try:
        yield
    except (pynvml.NVMLError, OSError) as error:
        raise _translate(error, operation) from error


class NvmlSession:
    """An initialised NVML: open with `NvmlSession.open()`, close (or use as a context manager) when done."""

    def __init__(self) -> None:
        """Use `open()`; the constructor does not initialise NVML."""
        self._open = False

    @classmethod
    def open(cls) -> NvmlSession:
        """Load the library and call `nvmlInit` (`nvmlInitWithFlags(0)`); every failure is NvmlUnavailable.

        Flag 0, not NVML_INIT_FLAG_NO_GPUS: a sidecar with no GPU should learn so here, as a failure it
        retries, rather than from an empty device list.
        """
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError, OSError) as error:
            translated = _translate(error, "nvmlInit")
            raise NvmlUnavailable(str(translated), translated.code) from error
        session = cls()
        session._open = True
        return session

    def close(self) -> None:
        """Call `nvmlShutdown` once; later calls do nothing. Shutdown errors are ignored: we are leaving."""
        if not self._open:
            return
        self._open = False
        with suppress(pynvml.NVMLError, OSError):
            pynvml.nvmlShutdown()

    def __enter__(self) -> NvmlSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def driver_version(self) -> str:
        with _calling("nvmlSystemGetDriverVersion"):
            return str(pynvml.nvmlSystemGetDriverVersion())

    def inventory(self) -> Inventory:
        """Enumerate every visible GPU, or its MIG devices when it is in MIG mode.

        A GPU that fails while being enumerated is left out and reported in `failures`, so one lost GPU
        does not hide the others. Failing to count GPUs at all raises.
        """
        with _calling("nvmlDeviceGetCount"):
            count = int(pynvml.nvmlDeviceGetCount())
        devices: list[Device] = []
        failures: list[NvmlError] = []
        not_permitted: list[str] = []
        mig_without_devices: list[Device] = []
        mig_of_others: list[Device] = []
        for index in range(count):
            try:
                devices.extend(self._enumerate_gpu(index, not_permitted, mig_without_devices, mig_of_others))
            except NvmlUnavailable:
                raise  # NVML itself went away: the whole session is useless
            except NvmlError as error:
                failures.append(error)
        return Inventory(tuple(devices), tuple(failures), tuple(not_permitted), tuple(mig_without_devices),
                         tuple(mig_of_others))

    def _enumerate_gpu(self, index: int, not_permitted: list[str], mig_without_devices: list[Device],
                       mig_of_others: list[Device]) -> list[Device]:
        """The GPU at `index`, or its MIG devices; none for a GPU this process may not talk to.

        nvmlDeviceGetCount_v2 counts every GPU of the machine, and nvmlDeviceGetHandleByIndex_v2 answers
        NO_PERMISSION for one this process has no access to (nvml.h): a GPU not given to this container, not
        visible here, not a failure of NVML. So is a MIG device NVML answers NO_PERMISSION for (another
        container's), noted in `not_permitted`: it failed the whole GPU's enumeration, a failure for good."""
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as error:
            if int(error.value) == pynvml.NVML_ERROR_NO_PERMISSION:
                return []
            raise _translate(error, f"GPU {index}: nvmlDeviceGetHandleByIndex") from error
        with _calling(f"GPU {index}: nvmlDeviceGetUUID"):
            uuid = str(pynvml.nvmlDeviceGetUUID(handle))
        with _calling(f"GPU {index}: nvmlDeviceGetName"):
            name = str(pynvml.nvmlDeviceGetName(handle))
        minor = self._minor_number(handle, index)
        if not self._mig_enabled(handle, index):
            return [Device(index, uuid, name, handle=handle, minor=minor)]
        migs = self._mig_devices(handle, index, uuid, minor, not_permitted)
        if not migs:
            whole = Device(index, uuid, name, handle=handle, minor=minor)
            others = any(label.startswith(f"{index}/") for label in not_permitted)
            (mig_of_others if others else mig_without_devices).append(whole)
        return migs

    def mig_devices(self, device: Device) -> tuple[Device, ...]:
        """The MIG devices on the GPU of `device` (the GPU itself, or one of its MIG devices) as they are now, but
        those NVML gives this process no permission on (another container's). Raises as enumeration does where the
        GPU does not answer, or has left MIG mode.

        MIG devices are created and destroyed while the GPU stays in MIG mode (`nvidia-smi mig -cgi`/`-dgi`, the GPU
        operator's mig-manager), and NVML may hand a destroyed device's handle to a new one: a caller compares
        UUIDs with what it enumerated to know when to enumerate again. Costs nvmlDeviceGetMaxMigDeviceCount, one
        nvmlDeviceGetMigDeviceHandleByIndex a slot, and a UUID and a name per MIG device."""
        handle = device.parent_handle if device.is_mig else device.handle
        gpu_uuid = device.parent_uuid if device.parent_uuid is not None else device.uuid
        return tuple(self._mig_devices(handle, device.index, gpu_uuid, device.minor, []))

    @staticmethod
    def _mig_devices(handle: Any, index: int, uuid: str, minor: int | None,
                     not_permitted: list[str]) -> list[Device]:
        """The MIG devices of the GPU in MIG mode at `index`; the ones NVML refuses this process go in
        `not_permitted` (another container's)."""
        with _calling(f"GPU {index}: nvmlDeviceGetMaxMigDeviceCount"):
            slots = int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        migs: list[Device] = []
        for mig_index in range(slots):
            try:
                mig_handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, mig_index)
            except pynvml.NVMLError as error:
                if int(error.value) == pynvml.NVML_ERROR_NOT_FOUND:
                    continue  # an empty slot: no MIG device was created there
                if int(error.value) == pynvml.NVML_ERROR_NO_PERMISSION:
                    not_permitted.append(f"{index}/{mig_index}")
                    continue
                raise _translate(error, f"GPU {index}: nvmlDeviceGetMigDeviceHandleByIndex") from error
            with _calling(f"GPU {index} MIG {mig_index}: nvmlDeviceGetUUID"):
                mig_uuid = str(pynvml.nvmlDeviceGetUUID(mig_handle))
            with _calling(f"GPU {index} MIG {mig_index}: nvmlDeviceGetName"):
                mig_name = str(pynvml.nvmlDeviceGetName(mig_handle))
            migs.append(Device(index, mig_uuid, mig_name, mig_index, uuid, mig_handle, minor, handle))
        return migs

    @staticmethod
    def _minor_number(handle: Any, index: int) -> int | None:
        """The GPU's device minor number; None where NVML has none for it (NOT_SUPPORTED)."""
        try:
            with _calling(f"GPU {index}: nvmlDeviceGetMinorNumber"):
                return int(pynvml.nvmlDeviceGetMinorNumber(handle))
        except NotSupported:
            return None

    def mig_enabled(self, device: Device) -> bool:
        """Whether the GPU of `device` (the GPU itself, or a MIG device's GPU) is in MIG mode now.

        Enumeration fixes which devices a session reads, and MIG mode can be switched under it: a whole GPU
        switched on then answers NOT_SUPPORTED to utilization, a MIG device of a GPU switched off answers as a
        device that does not exist. This tells either from a GPU without the query or a GPU lost."""
        return self._mig_enabled(device.parent_handle if device.is_mig else device.handle, device.index)

    @staticmethod
    def _mig_enabled(handle: Any, index: int) -> bool:
        """True when MIG is on; GPUs and drivers without MIG answer NOT_SUPPORTED or lack the function."""
        try:
            with _calling(f"GPU {index}: nvmlDeviceGetMigMode"):
                current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
        except NotSupported:
            return False
        return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)

    def utilization_samples(self, device: Device, since_us: int) -> list[UtilizationSample]:
        """GPU-utilization samples newer than `since_us`, oldest first (`nvmlDeviceGetSamples`).

        NVML keeps a ring buffer of samples taken every 1/6 s to 1 s depending on the product; `since_us=0`
        returns the whole buffer. Raises NotSupported where the device has no samples (MIG devices, some
        vGPUs), so the caller can fall back to `utilization_rate`.
        """
        try:
            value_type, samples = pynvml.nvmlDeviceGetSamples(
                device.handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, since_us,
            )
        except pynvml.NVMLError as error:
            if int(error.value) in _NO_NEW_SAMPLE_CODES:
                return []
            raise _translate(error, f"GPU {device.label}: nvmlDeviceGetSamples") from error
        value_field = _VALUE_FIELDS.get(int(value_type))
        if value_field is None:
            raise NotSupported(f"GPU {device.label}: nvmlDeviceGetSamples: unknown value type {value_type}")
        result = [
            UtilizationSample(int(s.timeStamp), float(getattr(s.sampleValue, value_field))) for s in samples
        ]
        result.sort(key=lambda s: s.timestamp_us)
        return result

    def utilization_rate(self, device: Device) -> float:
        """Percent of the last sample period in which a kernel ran (`nvmlDeviceGetUtilizationRates().gpu`)."""
        with _calling(f"GPU {device.label}: nvmlDeviceGetUtilizationRates"):
            return float(pynvml.nvmlDeviceGetUtilizationRates(device.handle).gpu)

    def memory(self, device: Device) -> MemoryInfo:
        """Memory of the GPU or MIG device (`nvmlDeviceGetMemoryInfo`, v1 struct: total, free, used)."""
        with _calling(f"GPU {device.label}: nvmlDeviceGetMemoryInfo"):
            info = pynvml.nvmlDeviceGetMemoryInfo(device.handle)
        return MemoryInfo(used_bytes=int(info.used), total_bytes=int(info.total))
