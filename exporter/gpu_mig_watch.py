"""Which GPUs in MIG mode the sampler watches, and what changed on them: MIG devices created or destroyed while the
GPU stays in MIG mode (listed again every `MIG_RECHECK_S`), or the GPU out of MIG mode. A change has the sampler
enumerate the GPUs again in the same pass (`gpu_sampler.GpuSampler`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from exporter import nvml, nvml_devices, nvml_errors

__all__ = ["MIG_RECHECK_S", "MigWatched", "gpu_of", "mig_changes", "mig_watched", "why_mig_device_failed"]

MIG_RECHECK_S: Final = 10.0
"""How often the MIG devices of a GPU in MIG mode are listed again, to find those created or destroyed while it stays
in MIG mode (`nvidia-smi mig -cgi`/`-dgi`, the GPU operator's mig-manager applying another profile): enumeration
happened only at NVML's initialisation, so a new MIG device was never served. The default gpu window, and within
the adapter's 15 s refresh: a new device is read before the adapter's next look. A listing costs a GPU 8 calls (the
slot count, then one a slot of 7) and 2 a MIG device (UUID, name), by the fake NVML's counts: spread over ten
passes, 0.8 + 0.2 a MIG device a pass, about its memory read's 1 a pass (what a MIG device costs now, its
utilization asked once a minute: 3 a pass before; its memory too where NVML refuses it). Every pass would have
doubled the cost. A destroyed device is found sooner: at the pass its read fails."""

MigWatched = dict[str, tuple[nvml_devices.Device, dict[str, str]]]
"""GPUs in MIG mode, by UUID: a device on it to list its MIG devices by, and the MIG devices (UUID: label) on it."""


def gpu_of(device: nvml_devices.Device) -> tuple[str, str]:
    """(label, UUID) of the GPU of a device: the device itself, or a MIG device's GPU."""
    return device.label.split("/")[0], device.parent_uuid or device.uuid


def mig_watched(visible: Sequence[nvml_devices.Device], sampled: Sequence[nvml_devices.Device],
                mig_empty: Sequence[nvml_devices.Device]) -> MigWatched:
    """The GPUs of the MIG devices `sampled` and the GPUs in MIG mode with none yet (`mig_empty`), each with a device
    to list its MIG devices by and the visible MIG devices on it (UUID: label), to tell a change from."""
    watched: MigWatched = {}
    for device in (*(d for d in sampled if d.is_mig), *mig_empty):
        gpu_uuid = gpu_of(device)[1]
        known = {mig.uuid: mig.label for mig in visible if mig.parent_uuid == gpu_uuid}
        watched.setdefault(gpu_uuid, (device, known))
    return watched


def why_mig_device_failed(session: nvml.NvmlSession, device: nvml_devices.Device,
                          switched: Mapping[tuple[str, str], str], watched: MigWatched) -> str | None:
    """Why a MIG device's read failed where its GPU is still there: it left MIG mode, or the MIG device was
    destroyed (it then read as a GPU lost until NVML re-initialised); None for a failure of the device itself."""
    gpu = gpu_of(device)
    if gpu in switched:
        return switched[gpu]  # another of its MIG devices said why already
    if _left_mig_mode(session, device):
        return "left MIG mode, its MIG devices are gone"
    on_gpu = watched.get(gpu[1])
    return mig_changes(session, {gpu[1]: on_gpu}).get(gpu) if on_gpu is not None else None


def _left_mig_mode(session: nvml.NvmlSession, device: nvml_devices.Device) -> bool:
    """Whether the GPU of a MIG device that failed is out of MIG mode now (its MIG devices are gone)."""
    try:
        return not session.mig_enabled(device)
    except nvml_errors.NvmlError:
        return False  # the GPU does not answer either: lost, as before


def mig_changes(session: nvml.NvmlSession, watched: Mapping[str, tuple[nvml_devices.Device, dict[str, str]]]
                ) -> dict[tuple[str, str], str]:
    """The GPUs of `watched` whose MIG devices are not the ones enumerated, with what changed.

    A GPU that does not answer the listing is left to its reads, which say why (lost, left MIG mode)."""
    changes: dict[tuple[str, str], str] = {}
    for device, known in watched.values():
        try:
            now = {mig.uuid: mig.label for mig in session.mig_devices(device)}
        except nvml_errors.NvmlError:
            continue
        created = [f"GPU {label} {uuid}" for uuid, label in now.items() if uuid not in known]
        destroyed = [f"GPU {label} {uuid}" for uuid, label in known.items() if uuid not in now]
        if created or destroyed:
            what = "; ".join(f"{verb} {', '.join(devices)}"
                             for verb, devices in (("created", created), ("destroyed", destroyed)) if devices)
            changes[gpu_of(device)] = (
                f"had its MIG devices changed, MIG mode on throughout ({what})")
    return changes
