"""The GPUs and MIG devices NVML enumerates, as the exporter holds them (`Device`, `Inventory`), what it reads of
them (`UtilizationSample`, `MemoryInfo`), and which of them `--gpu-uuids` (or the kubelet's device files) chooses
(`select_devices`). Plain values: only `nvml` calls pynvml, and makes these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from exporter.nvml_errors import NvmlError

__all__ = ["DEVICE_FILE_PREFIX", "Device", "Inventory", "MemoryInfo", "Selection", "UtilizationSample",
           "select_devices"]


@dataclass(frozen=True)
class Device:
    """One GPU, or one MIG device of a GPU in MIG mode, as NVML enumerates it."""

    index: int
    """NVML index of the (parent) GPU. Within a container this is the index among the GPUs it can see."""
    uuid: str
    name: str
    mig_index: int | None = None
    """Index of the MIG device within its parent GPU; None for a whole GPU."""
    parent_uuid: str | None = None
    handle: Any = field(default=None, repr=False, compare=False)
    """pynvml's opaque `c_nvmlDevice_t`; valid only within the session that enumerated it."""
    minor: int | None = None
    """The (parent) GPU's device minor number, the N of `/dev/nvidiaN` (`nvmlDeviceGetMinorNumber`), by which
    GKE's device plugin names it; None where NVML has none. Not NVML's index: the kernel numbers GPUs in probe
    order, NVML in PCI bus order."""
    parent_handle: Any = field(default=None, repr=False, compare=False)
    """A MIG device's GPU's handle (None for a whole GPU), to ask whether that GPU is still in MIG mode."""

    @property
    def label(self) -> str:
        """Value of the `gpu` label: `"0"` for a GPU, `"0/1"` for MIG device 1 of GPU 0."""
        return str(self.index) if self.mig_index is None else f"{self.index}/{self.mig_index}"

    @property
    def is_mig(self) -> bool:
        return self.mig_index is not None


@dataclass(frozen=True)
class Inventory:
    """The devices a session could enumerate, and the GPUs that failed while being enumerated."""

    devices: tuple[Device, ...]
    failures: tuple[NvmlError, ...] = ()
    not_permitted: tuple[str, ...] = ()
    """MIG devices NVML gave this process no permission on (`"<gpu>/<mig>"`): another container's, left out."""
    mig_without_devices: tuple[Device, ...] = ()
    """GPUs in MIG mode with no MIG device yet (switched on, instances not created): nothing to sample, and no
    GPU lost either. Each as its whole GPU, which is not sampled: it has no utilization in MIG mode."""
    mig_of_others: tuple[Device, ...] = ()
    """GPUs in MIG mode whose every MIG device is another container's (in `not_permitted`): seen, not missing, so
    one named in `--gpu-uuids` is said as such. Each as its whole GPU, which is not sampled."""


@dataclass(frozen=True)
class Selection:
    """The devices chosen by `--gpu-uuids`, and configured UUIDs no visible device has."""

    devices: tuple[Device, ...]
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class UtilizationSample:
    timestamp_us: int
    """NVML's CPU timestamp of the sample, microseconds since the Unix epoch."""
    percent: float
    """Share of the sample period in which a kernel ran, 0..100."""


@dataclass(frozen=True)
class MemoryInfo:
    used_bytes: int
    """`used` of nvmlMemory_t v1 (= total - free): memory a new model cannot have, driver reserve included."""
    total_bytes: int


DEVICE_FILE_PREFIX: Final = "nvidia"
"""`nvidia<minor>`: a GPU named by its device file `/dev/nvidia<minor>`, as GKE's device plugin names GPUs."""


def select_devices(devices: Sequence[Device], uuids: Sequence[str] | None) -> Selection:
    """Keep the devices named by UUID (a GPU's UUID selects all its MIG devices) or by device file
    (`nvidia<minor>`, GKE's names; likewise with its MIG devices); None or empty keeps all.

    UUIDs compare case-insensitively and without surrounding spaces, as people paste them from
    `nvidia-smi -L`. A configured UUID that matches nothing is reported so the caller can call it an outage.
    """
    wanted = {u.strip().lower() for u in uuids or () if u.strip()}
    if not wanted:
        return Selection(tuple(devices))
    chosen = tuple(d for d in devices if _names(d) & wanted)
    seen = set().union(*(_names(d) for d in devices))
    missing = tuple(u.strip() for u in uuids or () if u.strip() and u.strip().lower() not in seen)
    return Selection(chosen, missing)


def _names(device: Device) -> set[str]:
    """What selects a device, lower-cased: its UUID, its GPU's UUID, its GPU's device file name."""
    names = {device.uuid.lower()}
    if device.parent_uuid is not None:
        names.add(device.parent_uuid.lower())
    if device.minor is not None:
        names.add(f"{DEVICE_FILE_PREFIX}{device.minor}")
    return names
