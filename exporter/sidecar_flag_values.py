"""The exporter's own flag values, each refused with what to write instead (the converters both programs take are
`exporter.flag_values`): the ranges of its durations (ModelMesh's reads and timeout, the load window, NVML's window
and reads, the wait for the kubelet, the model recency horizon), GPU UUIDs, and this pod's name and uid as the
downward API gives them. A value out of range names its range, not a traceback at start-up.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Final

from exporter.flag_values import LOAD_WINDOW_RANGE_S, MODELMESH_INTERVAL_RANGE_S, seconds_or_off, seconds_within
from exporter.kube_names import object_name_problem
from exporter.pod_resources import GKE_GPU, GPU_ID_PREFIXES
from exporter.recency_horizon_range import MODEL_RECENCY_HORIZON_RANGE_S

__all__ = ["GPU_INTERVAL_RANGE_S", "GPU_WINDOW_RANGE_S", "POD_RESOURCES_WAIT_RANGE_S", "TIMEOUT_RANGE_S",
           "gpu_interval", "gpu_window", "load_window", "model_recency_horizon", "modelmesh_interval",
           "modelmesh_timeout", "pod_name", "pod_resources_wait", "pod_uid", "uuid_list"]


modelmesh_interval = seconds_within(*MODELMESH_INTERVAL_RANGE_S)
"""Seconds between ModelMesh reads, within `MODELMESH_INTERVAL_RANGE_S`."""


load_window = seconds_within(*LOAD_WINDOW_RANGE_S)
"""Seconds of the load window, within `LOAD_WINDOW_RANGE_S`."""


TIMEOUT_RANGE_S = MODELMESH_INTERVAL_RANGE_S
"""The ModelMesh read timeouts taken, as the intervals: `--modelmesh-timeout 1e9` (a slip of zeros) was taken, and a
ModelMesh that stopped answering held the read, and the values, for ever; below a tenth of a second every read
times out."""

modelmesh_timeout = seconds_within(*TIMEOUT_RANGE_S)
"""Seconds to wait for one ModelMesh read, within `TIMEOUT_RANGE_S`."""


GPU_WINDOW_RANGE_S = (0.1, 3600.0)
"""The GPU windows taken: the window keeps NVML's samples within it, so `--gpu-window 1e9` kept every sample for
ever, as `--load-window 1e12` kept every reading; an hour is far longer than any scaling decision looks back."""

gpu_window = seconds_within(*GPU_WINDOW_RANGE_S)
"""Seconds of NVML samples averaged into busy, within `GPU_WINDOW_RANGE_S`."""


GPU_INTERVAL_RANGE_S = (0.1, 3600.0)
"""The NVML read intervals taken: `--gpu-interval 1e9` read the GPUs once and never again, the busy ratio held at
its first reading; below a tenth of a second NVML is asked without pause for samples it makes a few times a
second."""

gpu_interval = seconds_within(*GPU_INTERVAL_RANGE_S)
"""Seconds between NVML reads, within `GPU_INTERVAL_RANGE_S`."""


POD_RESOURCES_WAIT_RANGE_S = (0.1, 600.0)
"""The start's waits for the kubelet taken: `--gpu-pod-resources-wait 1e12` waited for ever on a kubelet that was
not restarting but gone, the sidecar neither serving nor saying why. A kubelet restarts in seconds; ten minutes is
far past that, and past the sidecar's liveness probe (about 70 s in the shipped patch), which restarts the
container first unless it is raised with the wait."""

pod_resources_wait = seconds_within(*POD_RESOURCES_WAIT_RANGE_S)
"""Seconds the start waits for the kubelet's PodResources API, within `POD_RESOURCES_WAIT_RANGE_S`."""


model_recency_horizon = seconds_within(*MODEL_RECENCY_HORIZON_RANGE_S, read=seconds_or_off)
"""Seconds a served model stays in the output, within `MODEL_RECENCY_HORIZON_RANGE_S` (0: off)."""


_UUID_HINT: Final = "give the UUIDs nvidia-smi -L prints (GPU-..., MIG-...)"


def uuid_list(value: str) -> tuple[str, ...]:
    """GPU UUIDs (`GPU-...`, `MIG-...`) or GKE's device file names (`nvidia0`). NVIDIA_VISIBLE_DEVICES's other
    values (`all`, `none`, `void`, indexes) are refused here: taken as UUIDs, they matched no GPU, and the GPU
    collector failed for good ("configured GPU all is not visible")."""
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    if value.strip() and not names:  # only separators: taken as no list, it reported every GPU, silently
        raise argparse.ArgumentTypeError(f"no GPU UUID in {value!r}, only separators: {_UUID_HINT}, or leave it "
                                         "unset to report every GPU this container sees")
    for name in names:
        lowered = name.lower()
        if name.upper().startswith(GPU_ID_PREFIXES) or GKE_GPU.fullmatch(lowered):
            continue
        if lowered == "all":
            raise argparse.ArgumentTypeError(
                "GPU UUIDs, not NVIDIA_VISIBLE_DEVICES's 'all': leave it unset to report every GPU this container sees")
        if lowered in ("none", "void"):
            raise argparse.ArgumentTypeError(
                f"GPU UUIDs, not NVIDIA_VISIBLE_DEVICES's {name!r}: --no-gpu (EXPORTER_NO_GPU=true) turns the GPU "
                "collector off")
        if name.isdigit():
            raise argparse.ArgumentTypeError(
                f"GPU UUIDs, not indexes ({name!r}), which change with the order the node finds its GPUs: {_UUID_HINT}")
        raise argparse.ArgumentTypeError(f"{name!r} is not a GPU UUID: {_UUID_HINT}")
    return names


def pod_name(value: str) -> str:
    """A pod's name as the downward API's metadata.name gives it: a name no pod can have (a template left
    unfilled, `$(POD_NAME)`) would name another pod than the adapter scraped for, and every answer be refused."""
    name = value.strip()
    if (rule := object_name_problem(name)) is not None:
        raise argparse.ArgumentTypeError(
            f"expected a pod name ({rule}), got {value!r}: set it from the downward API's metadata.name")
    return name


def pod_uid(value: str) -> str:
    """A pod's uid as the downward API's metadata.uid gives it (a UUID, lower-case)."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a pod uid (a UUID, as 0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11), got {value!r}: set it from the "
            "downward API's metadata.uid") from None
