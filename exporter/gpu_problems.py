"""How the GPU sampler says what leaves a GPU unsampled: NVML's failures with what to do where its own words do not
say (no driver or GPU in sight, a library and driver of different versions, MIG devices of other containers), the
GPUs a selection leaves out, and a GPU dropped after an error. Apart from NVML's setup in `gpu_sampler`, so that
each text reads beside its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter import nvml, nvml_devices, nvml_errors

__all__ = ["MIG_HINT", "NOT_VISIBLE_CODES", "NOT_VISIBLE_HINT", "VERSION_MISMATCH_HINT", "dropped", "nothing_to_sample",
           "said", "selection_problems"]

NOT_VISIBLE_HINT = (
    "the sidecar requests no GPU and sees the driver and GPUs only through the NVIDIA container runtime with "
    "NVIDIA_VISIBLE_DEVICES=all (manifests/examples/exporter-sidecar-patch.yaml); on a runtime without GPUs set "
    "EXPORTER_NO_GPU=true"
)
"""Said with the failures that mean this container sees no NVIDIA driver or no GPU: NVML's own words name
neither the setting that gives the sidecar sight of the GPUs nor the one that turns the collector off."""
NOT_VISIBLE_CODES = frozenset({None, nvml.LIBRARY_NOT_FOUND, nvml.DRIVER_NOT_LOADED})
MIG_HINT = (
    "NVML measures no utilization per MIG device anyway: on MIG, read GPU busy from NVIDIA's DCGM exporter (the "
    "adapter's --gpu-source=dcgm) and turn this collector off (EXPORTER_NO_GPU=true, --no-gpu)"
)
"""Said where this container has only MIG devices to read, or none of its own: docs/operations.md's way for MIG."""
VERSION_MISMATCH_HINT = (
    "this container's NVIDIA library and the driver loaded on the node are of different versions, which no retry "
    "here changes: the driver was upgraded on the node without a reboot (reboot the node, or reload its driver), "
    "or reloaded after this container started with the old one's library (delete this pod: a new one is given "
    "the new library)"
)
"""Said with NVML_ERROR_LIB_RM_VERSION_MISMATCH, at init or mid-run: NVML's words name neither cause nor cure."""


def said(error: nvml_errors.NvmlError) -> str:
    """The error as the log and the health line say it: with what to do, where NVML's words do not say."""
    if error.code == nvml.LIB_RM_VERSION_MISMATCH:
        return f"{error} ({VERSION_MISMATCH_HINT})"
    return str(error)


def nothing_to_sample(not_permitted: Sequence[str]) -> str:
    """Why a session that chose no device samples nothing: NVML sees no GPU, or only other containers' MIG devices.

    The MIG devices NVML shows this container and refuses it (NO_PERMISSION) are another container's: NVML does
    see the GPU, so the line said "NVML sees no GPU" and sent the operator to NVIDIA_VISIBLE_DEVICES, set right."""
    if not not_permitted:
        return f"NVML sees no GPU ({NOT_VISIBLE_HINT})"
    return ("the only GPUs NVML shows this container are MIG devices of other containers ("
            + ", ".join(f"GPU {label}" for label in not_permitted) + ": NVML gives this container no permission on "
            f"them); {MIG_HINT}")


def _configured_of_others(gpu: nvml_devices.Device, not_permitted: Sequence[str]) -> str:
    """A GPU named in --gpu-uuids whose MIG devices are all another container's: it was said "not visible", and
    "this container sees none", which sent the operator after a UUID that was right."""
    labels = ", ".join(f"GPU {label}" for label in not_permitted if label.startswith(f"{gpu.index}/"))
    return (f"configured GPU {gpu.uuid} (GPU {gpu.label}) is in MIG mode and its MIG devices are other containers' "
            f"({labels}: NVML gives this container no permission on them); {MIG_HINT}")


def selection_problems(inventory: nvml_devices.Inventory, selection: nvml_devices.Selection,
                       mig_empty: Sequence[nvml_devices.Device], uuids: Sequence[str]) -> list[str]:
    """What the devices chosen (`selection` of `inventory`, by `uuids` if any) leave unsampled, each in the words that
    send the operator to the right fix: GPUs in MIG mode with no MIG device yet (`mig_empty`), configured GPUs whose
    MIG devices are all another container's, configured UUIDs not visible (with what this container does see), and
    GPUs that failed while being enumerated."""
    # Configured GPUs whose MIG devices are all another container's: seen, so not "not visible".
    of_others = nvml_devices.select_devices(inventory.mig_of_others, uuids).devices if uuids else ()
    missing = [uuid for uuid in selection.missing
               if not nvml_devices.select_devices((*mig_empty, *of_others), [uuid]).devices]
    problems = [f"GPU {gpu.label} {gpu.uuid} is in MIG mode with no MIG device: nothing to sample on it until "
                "its MIG devices are created (looked for again at each retry)" for gpu in mig_empty]
    problems.extend(_configured_of_others(gpu, inventory.not_permitted) for gpu in of_others)
    problems.extend(f"configured GPU {uuid} is not visible" for uuid in missing)
    if missing:
        # Which UUIDs this container does see: a typo is then plain without exec-ing into the pod.
        seen = ", ".join(d.uuid for d in inventory.devices) or "none"
        problems.append(f"this container sees {seen}: the GPUs reported come from EXPORTER_GPU_UUIDS "
                        "(--gpu-uuids) or, with EXPORTER_GPU_POD_RESOURCES_SOCKET, from the kubelet, and the "
                        "sidecar sees the node's GPUs with NVIDIA_VISIBLE_DEVICES=all")
    if not uuids or missing:
        problems.extend(str(failure) for failure in inventory.failures)
    return problems


def dropped(device: nvml_devices.Device, error: nvml_errors.NvmlError) -> str:
    """A GPU dropped after an error, with its cause, in the same words at the pass that drops it and at every pass
    until NVML re-initialises: a GPU that still enumerates is read again at each re-initialisation and fails again,
    and two texts taking turns (NVML's error, then the bare "dropped") made CollectorHealth log the one outage
    again every minute."""
    return f"GPU {device.label} {device.uuid} dropped until NVML re-initialises: {said(error)}"
