"""The GPUs of this pod from the kubelet's PodResources API: a fake kubelet serves `v1.PodResourcesLister/List`
over gRPC on a unix socket, its answer encoded by the `protobuf` library from the kubelet's message definitions
(an encoder independent of the exporter's own decoder)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from exporter.pod_resources import (
    LIST_METHOD,
    PodResourcesError,
    decode_list_response,
    list_pod_resources,
    pod_gpu_ids,
    pod_resources,
    pod_resources_waiting,
)
from tests.exporter.test_exporter_app import promtool_findings
from tests.fakes.nvml import FakeNvml, default_uuid
from tests.support.processes import free_port, http_get, running

F = descriptor_pb2.FieldDescriptorProto


def kubelet_messages() -> dict[str, Any]:
    """The kubelet's podresources v1 messages (pkg/apis/podresources/v1/api.proto), the fields read here plus
    the ones around them, so unknown fields are exercised too."""
    proto = descriptor_pb2.FileDescriptorProto(name="podresources_v1_test.proto", package="v1", syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, str | None, bool]) -> None:
        described = proto.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            field = described.field.add(name=field_name, number=number, type=kind,
                                        label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                field.type_name = type_name

    message("NUMANode", ("ID", 1, F.TYPE_INT64, None, False))
    message("TopologyInfo", ("nodes", 1, F.TYPE_MESSAGE, ".v1.NUMANode", True))
    message("ContainerDevices", ("resource_name", 1, F.TYPE_STRING, None, False),
            ("device_ids", 2, F.TYPE_STRING, None, True), ("topology", 3, F.TYPE_MESSAGE, ".v1.TopologyInfo", False))
    message("CDIDevice", ("name", 1, F.TYPE_STRING, None, False))
    message("ClaimResource", ("cdi_devices", 1, F.TYPE_MESSAGE, ".v1.CDIDevice", True),
            ("driver_name", 2, F.TYPE_STRING, None, False), ("pool_name", 3, F.TYPE_STRING, None, False),
            ("device_name", 4, F.TYPE_STRING, None, False))
    message("DynamicResource", ("claim_name", 2, F.TYPE_STRING, None, False),
            ("claim_namespace", 3, F.TYPE_STRING, None, False),
            ("claim_resources", 4, F.TYPE_MESSAGE, ".v1.ClaimResource", True))
    message("ContainerResources", ("name", 1, F.TYPE_STRING, None, False),
            ("devices", 2, F.TYPE_MESSAGE, ".v1.ContainerDevices", True), ("cpu_ids", 3, F.TYPE_INT64, None, True),
            ("dynamic_resources", 5, F.TYPE_MESSAGE, ".v1.DynamicResource", True))
    message("PodResources", ("name", 1, F.TYPE_STRING, None, False), ("namespace", 2, F.TYPE_STRING, None, False),
            ("containers", 3, F.TYPE_MESSAGE, ".v1.ContainerResources", True))
    message("ListPodResourcesResponse", ("pod_resources", 1, F.TYPE_MESSAGE, ".v1.PodResources", True))
    message("GetPodResourcesRequest", ("pod_name", 1, F.TYPE_STRING, None, False),
            ("pod_namespace", 2, F.TYPE_STRING, None, False))
    message("GetPodResourcesResponse", ("pod_resources", 1, F.TYPE_MESSAGE, ".v1.PodResources", False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}"))
            for name in ("ListPodResourcesResponse", "GetPodResourcesRequest", "GetPodResourcesResponse")}


OUR_POD = ("modelmesh-serving", "modelmesh-serving-triton-5d9c-abcde")

Devices = tuple[tuple[str, tuple[str, ...]], ...]
"""(resource name, device IDs) of one container, as the kubelet lists them."""


def node_answer(ours_ids: tuple[str, ...] = ("GPU-aaaa", "GPU-bbbb"), ours: Devices | None = None,
                padding_pods: int = 0, ours_claimed: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A node's `List` answer: our runtime pod (its `triton` container holding `ours`, by default
    `nvidia.com/gpu` with `ours_ids`, and `ours_claimed` (driver, device) through DRA), other pods' GPUs, a MIG
    pod, a NIC pod, and `padding_pods` more pods
    of 8 KiB each (exclusive CPUs: a big node's answer)."""
    response = kubelet_messages()["ListPodResourcesResponse"]()
    pod = response.pod_resources.add(name=OUR_POD[1], namespace=OUR_POD[0])
    mm = pod.containers.add(name="triton", cpu_ids=[2, 3])
    for resource, ids in ours if ours is not None else (("nvidia.com/gpu", ours_ids),):
        device = mm.devices.add(resource_name=resource, device_ids=list(ids))
        device.topology.nodes.add(ID=0)
    for driver, device_name in ours_claimed:  # DRA: a ResourceClaim's devices (KubeletPodResourcesDynamicResources)
        claim = mm.dynamic_resources.add(claim_name="triton-gpu", claim_namespace=OUR_POD[0])
        claimed = claim.claim_resources.add(driver_name=driver, pool_name="gpu-node-7", device_name=device_name)
        claimed.cdi_devices.add(name=f"k8s.{driver}/claim=5d9c-{device_name}")
    pod.containers.add(name="autoscaler-exporter")  # the sidecar requests nothing
    other = response.pod_resources.add(name="training-0", namespace="research")
    other.containers.add(name="trainer").devices.add(resource_name="nvidia.com/gpu", device_ids=["GPU-cccc"])
    mig = response.pod_resources.add(name="small-0", namespace="modelmesh-serving")
    mig.containers.add(name="mm").devices.add(resource_name="nvidia.com/mig-1g.10gb", device_ids=["MIG-dddd"])
    nic = response.pod_resources.add(name="net-0", namespace="modelmesh-serving")
    nic.containers.add(name="c").devices.add(resource_name="example.com/nic", device_ids=["nic0"])
    for index in range(padding_pods):
        filler = response.pod_resources.add(name=f"batch-{index}", namespace="batch")
        filler.containers.add(name="worker", cpu_ids=list(range(1000, 1000 + 4096)))
    data: bytes = response.SerializeToString()
    return data


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[str]:
    async with fake_kubelet(tmp_path / "kubelet.sock", node_answer()) as socket:
        yield socket


KubeletGet = Literal["absent", "disabled", "on"]
"""The kubelet's `Get` (one pod): absent before 1.27 (UNIMPLEMENTED), behind the alpha feature gate
KubeletPodResourcesGet until 1.34 (an error, "PodResources API Get method disabled"), on from 1.34 (beta)."""


@contextlib.asynccontextmanager
async def fake_kubelet(path: Path, answer: bytes, get: KubeletGet = "absent",
                       calls: list[str] | None = None) -> AsyncIterator[str]:
    """A kubelet's PodResources server on the unix socket `path`: `List` gives `answer`, `Get` one pod of it as
    the kubelet's server_v1.go does (or not, by `get`). The methods called are appended to `calls`."""
    socket = str(path)
    messages = kubelet_messages()
    called = calls if calls is not None else []

    async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        called.append("List")
        return answer

    async def get_pod(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        called.append("Get")
        if get == "disabled":
            await context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        wanted = messages["GetPodResourcesRequest"].FromString(request)
        for pod in messages["ListPodResourcesResponse"].FromString(answer).pod_resources:
            if (pod.namespace, pod.name) == (wanted.pod_namespace, wanted.pod_name):
                found: bytes = messages["GetPodResourcesResponse"](pod_resources=pod).SerializeToString()
                return found
        await context.abort(grpc.StatusCode.UNKNOWN,
                            f"pod {wanted.pod_name} in namespace {wanted.pod_namespace} not found")
        raise AssertionError("abort returns only by raising")

    methods = {"List": grpc.unary_unary_rpc_method_handler(list_pods, request_deserializer=lambda raw: raw,
                                                           response_serializer=lambda raw: raw)}
    if get != "absent":
        methods["Get"] = grpc.unary_unary_rpc_method_handler(get_pod, request_deserializer=lambda raw: raw,
                                                             response_serializer=lambda raw: raw)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", methods),))
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    yield socket
    await server.stop(None)


async def test_the_pods_own_gpus_are_its_containers_device_ids(kubelet: str) -> None:
    pods = await list_pod_resources(kubelet)

    assert pod_gpu_ids(pods, "modelmesh-serving", "modelmesh-serving-triton-5d9c-abcde") == ("GPU-aaaa", "GPU-bbbb")
    assert pod_gpu_ids(pods, "modelmesh-serving", "small-0") == ("MIG-dddd",)  # a MIG device of the mixed strategy
    assert pod_gpu_ids(pods, "modelmesh-serving", "net-0") == ()  # devices, but no GPU
    assert pod_gpu_ids(pods, "modelmesh-serving", "not-on-this-node") is None


def test_a_gpu_under_a_resource_name_of_its_own_is_still_the_pods_gpu() -> None:
    """The device plugin's `resources.gpus[].name` renames a GPU model's resource (`nvidia.com/a100-80gb`); a
    NIC under `nvidia.com/` has a PCI address, a GPU its UUID."""
    answer = node_answer(ours=(("nvidia.com/a100-80gb", ("GPU-aaaa",)), ("nvidia.com/hostdev", ("0000:3b:00.2",))))

    assert pod_gpu_ids(decode_list_response(answer), *OUR_POD) == ("GPU-aaaa",)


@pytest.mark.parametrize("get", ["absent", "disabled", "on"])
async def test_this_pod_is_asked_for_alone_where_the_kubelet_can(tmp_path: Path, get: KubeletGet) -> None:
    calls: list[str] = []
    async with fake_kubelet(tmp_path / "kubelet.sock", node_answer(), get, calls) as socket:
        ours = await pod_resources(socket, *OUR_POD)
        elsewhere = await pod_resources(socket, "modelmesh-serving", "not-on-this-node")

    assert pod_gpu_ids(ours, *OUR_POD) == ("GPU-aaaa", "GPU-bbbb")
    assert pod_gpu_ids(elsewhere, "modelmesh-serving", "not-on-this-node") is None  # Get refuses; List lacks it
    assert calls == {"on": ["Get", "Get", "List"], "disabled": ["Get", "List"] * 2, "absent": ["List"] * 2}[get]


async def test_no_kubelet_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PodResourcesError, match="UNAVAILABLE"):
        await list_pod_resources(str(tmp_path / "missing.sock"), timeout_s=1.0)


async def test_a_kubelet_that_never_comes_is_given_up_on_and_a_garbled_answer_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(PodResourcesError, match="UNAVAILABLE") as missing:
        await pod_resources_waiting(str(tmp_path / "missing.sock"), *OUR_POD, patience_s=1.0, timeout_s=1.0)
    assert missing.value.transient
    assert "--root-dir" in str(missing.value)  # an empty hostPath directory: not the kubelet's own?
    assert 1.0 <= time.monotonic() - started < 5.0

    async with fake_kubelet(tmp_path / "kubelet.sock", node_answer()[:-3]) as socket:
        started = time.monotonic()
        with pytest.raises(PodResourcesError, match="truncated"):
            await pod_resources_waiting(socket, *OUR_POD, patience_s=30.0)
    assert time.monotonic() - started < 5.0


def test_a_truncated_answer_is_an_error_not_a_wrong_answer() -> None:
    with pytest.raises(PodResourcesError, match="truncated"):
        decode_list_response(node_answer()[:-3])


def test_the_method_is_the_kubelets() -> None:
    assert LIST_METHOD == "/v1.PodResourcesLister/List"


GPU_PASS = 'modelmesh_exporter_collector_duration_seconds{collector="gpu"}'
"""Present once the GPU collector has made its first NVML pass."""


POD_VARIABLES = {"EXPORTER_POD_NAME": OUR_POD[1], "EXPORTER_POD_NAMESPACE": OUR_POD[0]}
"""This pod as the sidecar patch names it (downward API), which the kubelet is asked about too."""


async def served_metrics(tmp_path: Path, answer: bytes, nvml: FakeNvml, get: KubeletGet = "absent",
                         calls: list[str] | None = None, kubelet_late: bool = False,
                         pod_env: dict[str, str] | None = None) -> str:
    """The exporter's /metrics after its first GPU pass, run as the sidecar is (`--gpu-pod-resources-socket`,
    this pod named by `pod_env`, by default the sidecar patch's downward API variables) beside a fake kubelet giving
    `answer`, up from the start or, `kubelet_late`, only once the sidecar has said it waits for it (a fixed delay
    was over before a loaded machine had started the sidecar). Checked clean by `promtool check metrics`."""
    port = free_port()
    socket = str(tmp_path / "kubelet.sock")
    async with contextlib.AsyncExitStack() as kubelet:

        async def start_kubelet(when_waited_for: bool) -> None:
            log = tmp_path / "exporter.log"
            while when_waited_for and not (log.exists() and "waiting for the kubelet" in log.read_text()):
                await asyncio.sleep(0.05)
            await kubelet.enter_async_context(fake_kubelet(Path(socket), answer, get, calls))

        if not kubelet_late:
            await start_kubelet(False)
        else:  # the kubelet restarting as the sidecar starts: no socket yet
            kubelet.push_async_callback(asyncio.wait_for, asyncio.create_task(start_kubelet(True)), 30)
        env = {**nvml.env(), **(POD_VARIABLES if pod_env is None else pod_env)}
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics",
                 "--gpu-pod-resources-socket", socket], f"http://127.0.0.1:{port}/healthz",
                tmp_path / "exporter.log", env=env))
            text = ""
            async with asyncio.timeout(20):
                while GPU_PASS not in text:
                    _, text = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/metrics")
                    await asyncio.sleep(0.2)
    assert promtool_findings(text) == (0, "")
    return text


def busy_uuids(text: str) -> set[str]:
    return set(re.findall(r'modelmesh_pod_gpu_busy_ratio\{[^}]*uuid="([^"]+)"', text))


def gpu_success(text: str) -> float:
    [value] = re.findall(r'modelmesh_exporter_collector_success\{collector="gpu"\} (\S+)', text)
    return float(value)


def node_with_gpus(tmp_path: Path, count: int = 3) -> FakeNvml:
    """A node whose `count` GPUs are all visible to the sidecar (NVIDIA_VISIBLE_DEVICES=all), each busy."""
    nvml = FakeNvml.create(tmp_path, gpus=count)
    for index in range(count):
        nvml.set_gpu(index, util=10 * (index + 1))
    return nvml


@pytest.mark.slow
async def test_the_exporter_reports_only_the_gpus_the_kubelet_gave_its_pod(tmp_path: Path) -> None:
    mine = (default_uuid(1), default_uuid(2))

    text = await served_metrics(tmp_path, node_answer(mine), node_with_gpus(tmp_path))

    assert busy_uuids(text) == set(mine)
    assert gpu_success(text) == 1


@pytest.mark.slow
async def test_the_older_gpu_pod_variables_still_name_the_pod_to_the_kubelet(tmp_path: Path) -> None:
    """A runtime patched before `--pod-name` existed names its pod with EXPORTER_GPU_POD_NAME/NAMESPACE alone."""
    mine = (default_uuid(0),)
    older = {"EXPORTER_GPU_POD_NAME": OUR_POD[1], "EXPORTER_GPU_POD_NAMESPACE": OUR_POD[0]}

    text = await served_metrics(tmp_path, node_answer(mine), node_with_gpus(tmp_path), pod_env=older)

    assert busy_uuids(text) == set(mine)
    assert gpu_success(text) == 1


@pytest.mark.slow
async def test_a_time_sliced_gpu_is_reported_by_its_uuid(tmp_path: Path) -> None:
    """Time-slicing and MPS (NVIDIA device plugin `sharing:`) hand out replicas named `<GPU UUID>::<replica>`,
    under `nvidia.com/gpu` or, renamed, `nvidia.com/gpu.shared`: the pod's GPU is the UUID before `::`, once
    however many replicas of it the pod holds."""
    shared = default_uuid(1)
    answer = node_answer(ours=(("nvidia.com/gpu.shared", (f"{shared}::3", f"{shared}::7")),))

    text = await served_metrics(tmp_path, answer, node_with_gpus(tmp_path))

    assert busy_uuids(text) == {shared}
    assert gpu_success(text) == 1
    # NVML's busy is the whole GPU's: every pod sharing it reports the others' work too. Said, not left to guess.
    [line] = [line for line in (tmp_path / "exporter.log").read_text().splitlines() if "shared" in line]
    assert "WARNING" in line and shared in line and "whole GPU" in line and "every pod sharing it" in line, line


@pytest.mark.slow
async def test_an_rdma_nic_of_nvidias_network_operator_is_not_a_gpu(tmp_path: Path) -> None:
    """NVIDIA's Network Operator names its SR-IOV and host-device NICs under `nvidia.com/` too (`nvidia.com/hostdev`,
    device IDs are PCI addresses): a GPUDirect RDMA runtime pod holds one beside its GPU. It is no GPU: not a
    "configured GPU is not visible" failure on every pass, which leaves the GPU signal stale for good."""
    mine = default_uuid(2)
    answer = node_answer(ours=(("nvidia.com/gpu", (mine,)), ("nvidia.com/hostdev", ("0000:3b:00.2",))))

    text = await served_metrics(tmp_path, answer, node_with_gpus(tmp_path))

    assert busy_uuids(text) == {mine}
    assert gpu_success(text) == 1


@pytest.mark.slow
@pytest.mark.parametrize("get", ["absent", "disabled", "on"])
async def test_a_big_nodes_answer_over_grpcs_default_4_mib_is_read(tmp_path: Path, get: KubeletGet) -> None:
    """gRPC clients refuse answers over 4 MiB by default (RESOURCE_EXHAUSTED, "received message larger than
    max"), and a busy node's `List` answer grows past that (dcgm-exporter issues 378, 408, 509); the kubelet
    sends any size. The sidecar exited at every start there. A kubelet with `Get` is asked for this pod alone."""
    mine = default_uuid(0)
    answer = node_answer((mine,), padding_pods=600)
    assert len(answer) > 4 << 20
    calls: list[str] = []

    text = await served_metrics(tmp_path, answer, node_with_gpus(tmp_path), get, calls)

    assert busy_uuids(text) == {mine}
    assert calls == {"on": ["Get"], "disabled": ["Get", "List"], "absent": ["List"]}[get]


@pytest.mark.slow
async def test_a_kubelet_restarting_as_the_sidecar_starts_is_waited_for(tmp_path: Path) -> None:
    """The kubelet unlinks its socket and makes it anew when it restarts (pkg/kubelet/util CreateListener), and
    rate-limits the API (RESOURCE_EXHAUSTED): for a few seconds the sidecar finds no socket. It exited at once,
    and then waited out the kubelet's restart back-off with neither GPU nor ModelMesh series."""
    mine = default_uuid(1)

    text = await served_metrics(tmp_path, node_answer((mine,)), node_with_gpus(tmp_path), kubelet_late=True)

    assert busy_uuids(text) == {mine}
    assert "waiting for the kubelet" in (tmp_path / "exporter.log").read_text()


def gpu_errors(text: str) -> float:
    found = re.findall(r'modelmesh_exporter_scrape_errors_total\{collector="gpu",reason="nvml"\} (\S+)', text)
    return float(found[0]) if found else 0.0


@pytest.mark.slow
async def test_a_gpu_claimed_through_dra_is_a_gpu_the_exporter_cannot_name_not_no_gpu(tmp_path: Path) -> None:
    """With Dynamic Resource Allocation (GA in 1.34) the pod's GPU comes from a ResourceClaim, listed under
    `dynamic_resources` (driver `gpu.nvidia.com`, device `gpu-0`): no NVML UUID to match. The exporter said the
    pod had no GPU and turned its GPU collector off, so the runtime read as CPU-only and no alert fired."""
    answer = node_answer(ours=(), ours_claimed=(("gpu.nvidia.com", "gpu-0"),))

    text = await served_metrics(tmp_path, answer, node_with_gpus(tmp_path))

    assert busy_uuids(text) == set()  # which of the node's GPUs is not known: none is reported as the pod's
    assert gpu_success(text) == 0
    assert gpu_errors(text) >= 1
    assert "gpu.nvidia.com" in (tmp_path / "exporter.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("resource", ["nvidia.com/mig-3g.40gb", "nvidia.com/gpu"])
async def test_a_mig_device_is_the_pods_alone_with_memory_and_no_busy(tmp_path: Path, resource: str) -> None:
    """MIG strategy mixed (`nvidia.com/mig-3g.40gb`) or single (`nvidia.com/gpu`): the device ID is the MIG
    device's UUID. Its GPU's other MIG device belongs to another pod; NVML measures no utilization per MIG device."""
    nvml = node_with_gpus(tmp_path)
    nvml.set_gpu(1, mig=2)
    mine = f"MIG-{default_uuid(1).removeprefix('GPU-')}-1"  # the fake's UUID for MIG device 1 of GPU 1

    text = await served_metrics(tmp_path, node_answer(ours=((resource, (mine,)),)), nvml)

    assert busy_uuids(text) == set()
    assert set(re.findall(r'modelmesh_pod_gpu_memory_total_bytes\{gpu="([^"]+)",uuid="([^"]+)"', text)) == {
        ("1/1", mine)}
    assert gpu_success(text) == 0  # busy, the signal scaled on, is missing: said, not hidden


@pytest.mark.slow
@pytest.mark.parametrize(("ids", "shared"), [(("nvidia0",), False), (("nvidia0/vgpu1", "nvidia0/vgpu4"), True)],
                         ids=["whole", "time-shared"])
async def test_gke_device_names_are_the_gpus_of_those_device_files(
    tmp_path: Path, ids: tuple[str, ...], shared: bool,
) -> None:
    """GKE's own device plugin names a GPU by its device file, `nvidia<minor>` (`nvidia0/vgpu1` for a replica of
    a time-shared GPU), not by UUID. The sidecar logged "DEVICE_ID_STRATEGY=index" (a setting GKE has no plugin
    for) and failed its GPU collector for good. The minor number is NVML's too (nvmlDeviceGetMinorNumber), and it
    need not follow NVML's index: here /dev/nvidia0 is NVML's GPU 1."""
    nvml = node_with_gpus(tmp_path)
    for index, minor in enumerate((2, 0, 1)):
        nvml.set_gpu(index, minor=minor)

    text = await served_metrics(tmp_path, node_answer(ours=(("nvidia.com/gpu", ids),)), nvml)

    assert busy_uuids(text) == {default_uuid(1)}
    assert gpu_success(text) == 1
    log = (tmp_path / "exporter.log").read_text()
    assert "DEVICE_ID_STRATEGY" not in log
    assert ("whole GPU" in log) == shared  # the time-sharing warning, as for the device plugin's replicas


def test_gke_replicas_of_a_time_shared_device_are_that_device_once() -> None:
    from exporter.pod_resources import pod_shared_gpus

    pods = decode_list_response(node_answer(ours=(("nvidia.com/gpu", ("nvidia1/gi3/vgpu0", "nvidia1/gi3/vgpu2")),)))
    assert pod_gpu_ids(pods, *OUR_POD) == ("nvidia1/gi3",)
    assert pod_shared_gpus(pods, *OUR_POD) == ("nvidia1/gi3",)


@pytest.mark.slow
async def test_gke_mig_device_names_are_said_to_be_unmatched_not_blamed_on_a_device_plugin_setting(
    tmp_path: Path,
) -> None:
    """GKE names a MIG device by GPU instance (`nvidia0/gi3`); the exporter does not match those to NVML's MIG
    devices. The log blamed DEVICE_ID_STRATEGY, a setting of NVIDIA's device plugin, which GKE does not run."""
    text = await served_metrics(tmp_path, node_answer(ours=(("nvidia.com/gpu", ("nvidia0/gi3",)),)),
                                node_with_gpus(tmp_path))

    assert gpu_success(text) == 0
    log = (tmp_path / "exporter.log").read_text()
    assert "DEVICE_ID_STRATEGY" not in log
    assert "nvidia0/gi3" in log and "--gpu-source=dcgm" in log, log


@pytest.mark.slow
async def test_gpu_indexes_from_the_device_plugin_are_named_as_such_in_the_log(tmp_path: Path) -> None:
    """The device plugin's `DEVICE_ID_STRATEGY=index` names GPUs `0`, `1` (and MIG devices `0:1`). An index says
    which GPU only among those NVML shows the plugin, not the sidecar, so it is not guessed at: no GPU is
    reported as the pod's, the collector fails (the alert fires), and the log says what to change."""
    answer = node_answer(ours=(("nvidia.com/gpu", ("1",)),))

    text = await served_metrics(tmp_path, answer, node_with_gpus(tmp_path))

    assert busy_uuids(text) == set()
    assert gpu_success(text) == 0
    log = (tmp_path / "exporter.log").read_text()
    assert "DEVICE_ID_STRATEGY=uuid" in log and "1" in log
    assert "EXPORTER_GPU_UUIDS" in log and "EXPORTER_GPU_POD_RESOURCES_SOCKET" in log  # --gpu-uuids needs it gone


@pytest.mark.slow
@pytest.mark.parametrize(("ids", "reported"), [
    (("0", "2"), None),
    (("nvidia0/gi3",), None),
    (("nvidia1", "nvidia0/gi3"), "nvidia1"),
], ids=["indexes", "gke-mig", "gke-gpu-beside-gke-mig"])
async def test_device_ids_that_cannot_be_used_are_not_said_to_be_reported(
    tmp_path: Path, ids: tuple[str, ...], reported: str | None,
) -> None:
    """Right after the ERROR saying the kubelet's device IDs cannot be used (indexes of DEVICE_ID_STRATEGY=index,
    GKE's MIG devices), an INFO line said "reporting the GPUs the kubelet gave this pod: 0, 2", which never
    match a GPU. Only the IDs that name a GPU the exporter can find are said to be reported, and none when none
    does."""
    text = await served_metrics(tmp_path, node_answer(ours=(("nvidia.com/gpu", ids),)), node_with_gpus(tmp_path))

    assert gpu_success(text) == 0
    log = (tmp_path / "exporter.log").read_text()
    assert "ERROR" in log, log
    said = [line for line in log.splitlines() if "reporting the GPUs the kubelet gave this pod" in line]
    if reported is None:
        assert said == [], said
    else:
        assert len(said) == 1 and said[0].endswith(f"this pod: {reported}"), said


@pytest.mark.slow
async def test_a_socket_volume_not_mounted_is_said_with_the_fix_and_the_sidecar_keeps_serving(tmp_path: Path) -> None:
    """The manifest sets EXPORTER_GPU_POD_RESOURCES_SOCKET but the pod has no hostPath volume for the kubelet's
    directory: the socket's directory is not there, and it will not appear by waiting. The sidecar waited 30 s
    and exited (status 2) at every start: a crash loop, which made the whole runtime pod not Ready, ModelMesh
    signals lost with it, and its message (UNAVAILABLE, failed to connect) named neither the volume nor how to
    turn the feature off. Now it serves ModelMesh's signals at once, reports no GPU as this pod's (the GPU
    collector fails: the alert fires), and says what to mount and what to unset."""
    port = free_port()
    socket = tmp_path / "not-mounted" / "kubelet.sock"
    env = {**node_with_gpus(tmp_path).env(), "EXPORTER_GPU_POD_NAME": OUR_POD[1],
           "EXPORTER_GPU_POD_NAMESPACE": OUR_POD[0], "EXPORTER_GPU_POD_RESOURCES_SOCKET": str(socket)}
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics"],
                 f"http://127.0.0.1:{port}/healthz", log, env=env):
        _, text = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/metrics")
    assert promtool_findings(text) == (0, "")
    assert busy_uuids(text) == set()
    assert gpu_success(text) == 0
    said = log.read_text()
    assert "waiting for the kubelet" not in said  # a volume does not appear by waiting
    assert "hostPath" in said and "/var/lib/kubelet/pod-resources" in said and str(socket.parent) in said
    assert "EXPORTER_GPU_POD_RESOURCES_SOCKET" in said and "--gpu-pod-resources-socket" in said


@pytest.mark.slow
async def test_a_pod_the_kubelet_does_not_list_is_said_by_its_variables_and_the_sidecar_keeps_serving(
    tmp_path: Path,
) -> None:
    """EXPORTER_GPU_POD_NAME set by hand (not from the downward API) and wrong: the kubelet lists no such pod.
    The sidecar exited (status 2) at every start, a crash loop that made the runtime pod not Ready, and said to
    check --gpu-pod-name, which the manifest does not contain."""
    port = free_port()
    env = {**node_with_gpus(tmp_path).env(), "EXPORTER_GPU_POD_NAME": "modelmesh-serving-triton",
           "EXPORTER_GPU_POD_NAMESPACE": OUR_POD[0]}
    log = tmp_path / "exporter.log"
    async with fake_kubelet(tmp_path / "kubelet.sock", node_answer()) as socket:
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics",
                 "--gpu-pod-resources-socket", socket], f"http://127.0.0.1:{port}/healthz", log, env=env))
            _, text = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/metrics")
    assert promtool_findings(text) == (0, "")
    assert busy_uuids(text) == set()
    assert gpu_success(text) == 0
    said = log.read_text()
    assert "EXPORTER_GPU_POD_NAME" in said and "EXPORTER_GPU_POD_NAMESPACE" in said and "metadata.name" in said
