"""The GPUs the kubelet allocated to this pod, from the kubelet's PodResources API, as NVIDIA's dcgm-exporter
attributes GPUs to pods.

Why: the sidecar requests no GPU, so it is given sight of the node's GPUs (`NVIDIA_VISIBLE_DEVICES=all`); on a
node shared by several GPU pods it would then report GPUs that belong to other pods. The kubelet knows which
device IDs it gave each container: `v1.PodResourcesLister/List` on the unix socket
`/var/lib/kubelet/pod-resources/kubelet.sock` (GA since Kubernetes 1.28). The NVIDIA device plugin's device IDs
are GPU UUIDs (`GPU-...`, or `MIG-...` for MIG devices) with its default `DEVICE_ID_STRATEGY=uuid`; those are
exactly what `--gpu-uuids` takes. A GPU shared by time-slicing or MPS (the device plugin's `sharing:` config) is
handed out as replicas named `<GPU UUID>::<replica>` (`nvidia.com/gpu`, or renamed `nvidia.com/gpu.shared`): the
GPU is the UUID before `::`, counted once however many replicas of it the pod holds. GKE runs a device plugin of
its own, which names a GPU by its device file, `nvidia<minor>` (replicas of a time-shared one `nvidia0/vgpu1`, MIG
devices `nvidia0/gi3`): the exporter finds such a GPU by NVML's minor number (`exporter.nvml_devices.select_devices`).

This pod alone is asked for with `v1.PodResourcesLister/Get` (beta and on by default since Kubernetes 1.34); a
kubelet without it (UNIMPLEMENTED before 1.27, an error while its feature gate is off) is asked for every pod
with `List`, read up to `LIST_MAX_BYTES`: a busy node's answer passes gRPC's default limit of 4 MiB.

The call is gRPC (a new, optional dependency: `grpcio`, the `pod-resources` extra, imported only when the flag
is on). The answer is decoded here from the protobuf wire format, field numbers as in the kubelet's
`pkg/apis/podresources/v1/api.proto`, so no generated code or `protobuf` runtime is needed:

    GetPodResourcesRequest   { string pod_name = 1; string pod_namespace = 2; }
    GetPodResourcesResponse  { PodResources pod_resources = 1; }
    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources             { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
    ContainerResources       { string name = 1; repeated ContainerDevices devices = 2; ...;
                               repeated DynamicResource dynamic_resources = 5; }
    ContainerDevices         { string resource_name = 1; repeated string device_ids = 2; ... }
    DynamicResource          { ...; repeated ClaimResource claim_resources = 4; }
    ClaimResource            { ...; string driver_name = 2; string pool_name = 3; string device_name = 4; ... }

A GPU allocated through Dynamic Resource Allocation (a ResourceClaim of NVIDIA's DRA driver, `gpu.nvidia.com`)
is listed under `dynamic_resources` by a device name of the driver's (`gpu-0`), not a UUID: the pod has a GPU,
but which of the node's it is cannot be told here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

LIST_METHOD: Final = "/v1.PodResourcesLister/List"
GET_METHOD: Final = "/v1.PodResourcesLister/Get"
LIST_MAX_BYTES: Final = 16 << 20
"""The largest `List` answer read: the limit the kubelet's own gRPC clients take (gRPC's default, 4 MiB, is passed
on busy nodes). An exporter that read a 15 MiB answer peaked at 95 MiB resident, inside the sidecar's 128 MiB."""
DEFAULT_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"
"""Where the kubelet serves PodResources: the hostPath `--gpu-pod-resources-socket` names (its help says so)."""
NVIDIA_PREFIX: Final = "nvidia.com/"
"""The domain of the NVIDIA device plugin's resources, and of NVIDIA's Network Operator NICs too."""
GPU_RESOURCE_PREFIXES: Final = ("nvidia.com/gpu", "nvidia.com/mig-")
"""The device plugin's GPU resources: `nvidia.com/gpu` (whole GPUs, or MIG devices of the single strategy),
`nvidia.com/gpu.shared` (shared replicas, renamed), `nvidia.com/mig-1g.10gb` etc. (the mixed MIG strategy)."""
GPU_ID_PREFIXES: Final = ("GPU-", "MIG-")
"""NVML's UUIDs of a GPU and of a MIG device: how a GPU under a renamed resource (the device plugin's
`resources.gpus[].name`) is told from a NIC of the Network Operator (`nvidia.com/hostdev`, PCI addresses)."""
DRA_GPU_DRIVER: Final = "gpu.nvidia.com"
"""NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu), as a ClaimResource's `driver_name`."""
REPLICA_SEPARATOR: Final = "::"
"""The device plugin's replica IDs of a shared GPU: `GPU-<uuid>::<replica>` (its `rm.AnnotatedID`)."""
GKE_GPU: Final = re.compile(r"nvidia[0-9]+")
"""GKE's own device plugin names a GPU by its device file, `nvidia<minor>` (`/dev/nvidia<minor>`), not by UUID;
the exporter finds it by NVML's minor number."""
GKE_REPLICA: Final = re.compile(r"(nvidia[0-9]+(?:/gi[0-9]+)?)/vgpu[0-9]+")
"""GKE's replicas of a time-shared GPU (`nvidia0/vgpu1`) or MIG device (`nvidia0/gi3/vgpu1`): the device is
the part before `/vgpu`."""
GKE_MIG: Final = re.compile(r"nvidia[0-9]+/gi[0-9]+")
"""GKE's MIG devices, by GPU instance (`nvidia0/gi3`)."""


log = logging.getLogger(__name__)

TRANSIENT_CODES: Final = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"})
"""gRPC codes of a kubelet that may answer in a moment: restarting (its socket is unlinked and made anew, or
nobody listens on it yet), over its rate limit ("rejected by rate limit"), or slow."""
HOST_DIRECTORY: Final = "/var/lib/kubelet/pod-resources"
"""The node's directory that holds the kubelet's socket, mounted into the sidecar by a hostPath volume."""
TURN_OFF_HINT: Final = (
    "to report every GPU this container sees instead, unset EXPORTER_GPU_POD_RESOURCES_SOCKET (or drop "
    "--gpu-pod-resources-socket): leave out manifests/examples/exporter-pod-resources-patch.yaml"
)
"""How to turn the PodResources feature off, in the words of a sidecar's manifest (its variable) and of the
command line (its flag)."""


class PodResourcesError(Exception):
    """The kubelet could not be asked, or its answer could not be read; the message says which. `transient`:
    the kubelet may answer if asked again shortly."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    container: str
    resource_name: str
    """The device plugin's resource, or for a DRA claim's device the DRA driver."""
    device_ids: tuple[str, ...]
    """The device plugin's device IDs, or for a DRA claim's device `<pool>/<device name>`."""
    claimed: bool = False
    """Allocated through a DRA ResourceClaim (`dynamic_resources`), not by a device plugin."""


@dataclass(frozen=True, slots=True)
class PodDevices:
    namespace: str
    name: str
    devices: tuple[ContainerDevices, ...]


def decode_list_response(data: bytes) -> list[PodDevices]:
    """Decode a `ListPodResourcesResponse`, or a `GetPodResourcesResponse` (the same field, once); a malformed
    message raises `PodResourcesError`."""
    pods = []
    for field, value in _fields(data):
        if field == 1 and isinstance(value, bytes):
            pods.append(_pod(value))
    return pods


def pod_gpu_ids(pods: Sequence[PodDevices], namespace: str, name: str) -> tuple[str, ...] | None:
    """The GPU UUIDs of every container of one pod, in order, each once (replicas of a shared GPU are its UUID);
    None when the kubelet lists no such pod.

    A GPU is a device of the device plugin's GPU resources, or a device with a GPU's or MIG device's UUID
    under another `nvidia.com/` resource; other `nvidia.com/` devices (the Network Operator's NICs) are not."""
    for pod in pods:
        if (pod.namespace, pod.name) == (namespace, name):
            uuids = (
                (d.resource_name, _shared_device(device_id) or device_id)
                for d in pod.devices if not d.claimed for device_id in d.device_ids
            )
            return tuple(dict.fromkeys(uuid for resource, uuid in uuids if _is_gpu(resource, uuid)))
    return None


def pod_shared_gpus(pods: Sequence[PodDevices], namespace: str, name: str) -> tuple[str, ...]:
    """The GPU UUIDs one pod holds as replicas of a GPU shared by time-slicing or MPS (`<UUID>::<replica>`)."""
    return tuple(dict.fromkeys(
        shared
        for pod in pods if (pod.namespace, pod.name) == (namespace, name)
        for d in pod.devices if not d.claimed for device_id in d.device_ids
        if (shared := _shared_device(device_id)) and _is_gpu(d.resource_name, device_id)
    ))


def _shared_device(device_id: str) -> str | None:
    """The device a replica ID of a shared GPU names (`GPU-<uuid>::3` and GKE's `nvidia0/vgpu3`); None for a
    device ID that is no replica."""
    if REPLICA_SEPARATOR in device_id:
        return device_id.partition(REPLICA_SEPARATOR)[0]
    if matched := GKE_REPLICA.fullmatch(device_id):
        return matched.group(1)
    return None


def pod_claimed_gpus(pods: Sequence[PodDevices], namespace: str, name: str) -> tuple[str, ...]:
    """The GPUs one pod holds through DRA claims of NVIDIA's driver, as `gpu.nvidia.com/<pool>/<device>`."""
    return tuple(
        f"{d.resource_name}/{device_id}"
        for pod in pods if (pod.namespace, pod.name) == (namespace, name)
        for d in pod.devices if d.claimed and d.resource_name == DRA_GPU_DRIVER
        for device_id in d.device_ids
    )


def _is_gpu(resource_name: str, device_id: str) -> bool:
    if resource_name.startswith(GPU_RESOURCE_PREFIXES):
        return True
    return resource_name.startswith(NVIDIA_PREFIX) and device_id.startswith(GPU_ID_PREFIXES)


async def pod_resources(socket_path: str, namespace: str, name: str, timeout_s: float = 5.0) -> list[PodDevices]:
    """Ask the kubelet on `socket_path` for one pod's devices: `Get`, or `List` (every pod) where the kubelet has
    no `Get` or refuses it. The kubelet answers `Get` for a pod it does not know with an error too; `List` then
    says so by not listing it."""
    request = _string_field(1, name) + _string_field(2, namespace)
    try:
        return decode_list_response(await _call(socket_path, GET_METHOD, request, timeout_s))
    except PodResourcesError:
        return await list_pod_resources(socket_path, timeout_s)


async def pod_resources_waiting(socket_path: str, namespace: str, name: str, patience_s: float,
                                timeout_s: float = 5.0) -> list[PodDevices]:
    """`pod_resources`, asked again (after 0.5 s, 1, 2, 4, ... 8 s) while the kubelet may answer in a moment, for
    `patience_s` at most; a kubelet that cannot answer (no permission, a garbled answer) fails at once."""
    deadline = time.monotonic() + patience_s
    delay_s = 0.5
    while True:
        try:
            return await pod_resources(socket_path, namespace, name, timeout_s)
        except PodResourcesError as error:
            left_s = deadline - time.monotonic()
            if not error.transient or left_s <= 0:
                raise
            if delay_s == 0.5:
                log.warning("waiting for the kubelet (up to %g s): %s", patience_s, error)
            await asyncio.sleep(min(delay_s, left_s))
            delay_s = min(delay_s * 2, 8.0)


async def list_pod_resources(socket_path: str, timeout_s: float = 5.0) -> list[PodDevices]:
    """Ask the kubelet on `socket_path` for every pod's devices."""
    return decode_list_response(await _call(socket_path, LIST_METHOD, b"", timeout_s))


async def _call(socket_path: str, method: str, request: bytes, timeout_s: float) -> bytes:
    """One unary call on the kubelet's socket, the message as raw bytes both ways."""
    try:
        import grpc
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise PodResourcesError("the kubelet PodResources API needs grpcio: pip install "
                                "'modelmesh-autoscaler[pod-resources]'") from error
    directory = os.path.dirname(socket_path) or "."
    if not os.path.isdir(directory):
        # No kubelet makes this directory appear: the pod lacks its hostPath volume (or the path has a typo).
        raise PodResourcesError(
            f"kubelet PodResources API at {socket_path}: the directory {directory} is not there: mount the node's "
            f"{HOST_DIRECTORY} into this container at {directory} with a hostPath volume (type Directory), as "
            f"manifests/examples/exporter-pod-resources-patch.yaml does; or {TURN_OFF_HINT}")
    if os.path.exists(socket_path) and not os.access(socket_path, os.W_OK):
        raise PodResourcesError(f"kubelet PodResources API at {socket_path}: this user (uid {os.getuid()}) may not "
                                "connect: the kubelet's socket is root's; run the sidecar as root, as "
                                "exporter-pod-resources-patch.yaml does")
    options = [("grpc.max_receive_message_length", LIST_MAX_BYTES)]
    try:
        async with grpc.aio.insecure_channel(f"unix://{socket_path}", options=options) as channel:
            call = channel.unary_unary(method, request_serializer=lambda raw: raw,
                                       response_deserializer=lambda raw: raw)
            answer: bytes = await call(request, timeout=timeout_s)
    except grpc.RpcError as error:
        code = error.code().name
        hint = ""
        if not os.path.exists(socket_path):
            hint = (f" (no socket in {os.path.dirname(socket_path)}: the kubelet is restarting, or the hostPath volume "
                    "is not the kubelet's own directory: a kubelet with another --root-dir, as k0s or microk8s run, "
                    "keeps its pod-resources directory there)")
        raise PodResourcesError(f"kubelet PodResources API at {socket_path}: {method}: {code}: {error.details()}"
                                f"{hint}", transient=code in TRANSIENT_CODES) from error
    return answer


def _string_field(number: int, text: str) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    data = text.encode()
    return _varint_bytes(number << 3 | 2) + _varint_bytes(len(data)) + data


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pod(data: bytes) -> PodDevices:
    name = namespace = ""
    devices: list[ContainerDevices] = []
    for field, value in _fields(data):
        if field == 1 and isinstance(value, bytes):
            name = _text(value)
        elif field == 2 and isinstance(value, bytes):
            namespace = _text(value)
        elif field == 3 and isinstance(value, bytes):
            devices.extend(_container(value))
    return PodDevices(namespace, name, tuple(devices))


def _container(data: bytes) -> list[ContainerDevices]:
    name = ""
    raw_devices: list[bytes] = []
    raw_claims: list[bytes] = []
    for field, value in _fields(data):
        if field == 1 and isinstance(value, bytes):
            name = _text(value)
        elif field == 2 and isinstance(value, bytes):
            raw_devices.append(value)
        elif field == 5 and isinstance(value, bytes):
            raw_claims.append(value)
    found = []
    for raw in raw_devices:
        resource, ids = "", []
        for field, value in _fields(raw):
            if field == 1 and isinstance(value, bytes):
                resource = _text(value)
            elif field == 2 and isinstance(value, bytes):
                ids.append(_text(value))
        found.append(ContainerDevices(name, resource, tuple(ids)))
    for raw in raw_claims:
        for field, value in _fields(raw):
            if field == 4 and isinstance(value, bytes):
                found.append(_claimed(name, value))
    return found


def _claimed(container: str, data: bytes) -> ContainerDevices:
    """One `ClaimResource`: its driver, and its device as `<pool>/<device name>`."""
    strings = {field: _text(value) for field, value in _fields(data) if field in (2, 3, 4) and isinstance(value, bytes)}
    return ContainerDevices(container, strings.get(2, ""), (f"{strings.get(3, '')}/{strings.get(4, '')}",),
                            claimed=True)


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message: varints as int, length-delimited as bytes; fixed-width
    fields are skipped (none of the fields read here is one)."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
            yield field, value
        elif wire_type == 2:
            length, position = _varint(data, position)
            if position + length > len(data):
                raise PodResourcesError("truncated PodResources message")
            yield field, data[position:position + length]
            position += length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise PodResourcesError(f"unsupported protobuf wire type {wire_type} in a PodResources message")


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise PodResourcesError("truncated varint in a PodResources message")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _text(value: bytes) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError as error:
        raise PodResourcesError("a PodResources string is not UTF-8") from error
