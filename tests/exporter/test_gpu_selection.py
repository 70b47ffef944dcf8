"""`select_devices` over random nodes: a GPU named by UUID or by its device file (`nvidia<minor>`, GKE's names)
selects that GPU and its MIG devices, whatever NVML's index order, and a name no device has is reported missing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exporter import nvml_devices


@st.composite
def nodes(draw: st.DrawFn) -> list[nvml_devices.Device]:
    """GPUs in NVML's index order with minor numbers in any order, some in MIG mode with MIG devices."""
    count = draw(st.integers(1, 8))
    minors = draw(st.permutations(range(count)))
    devices: list[nvml_devices.Device] = []
    for index, minor in enumerate(minors):
        uuid = f"GPU-{index:08x}"
        migs = draw(st.integers(0, 3))
        if migs == 0:
            devices.append(nvml_devices.Device(index, uuid, "GPU", minor=minor))
        devices.extend(nvml_devices.Device(index, f"MIG-{index:08x}-{mig}", "MIG", mig, uuid, minor=minor)
                       for mig in range(migs))
    return devices


@given(nodes(), st.data())
def test_a_device_file_name_selects_the_gpu_with_that_minor_number(
    devices: list[nvml_devices.Device], data: st.DataObject,
) -> None:
    minor = data.draw(st.sampled_from(sorted({d.minor for d in devices if d.minor is not None})))
    by_uuid = data.draw(st.booleans())
    gpu_uuid = next(d.parent_uuid or d.uuid for d in devices if d.minor == minor)
    name = gpu_uuid if by_uuid else f"nvidia{minor}"

    selection = nvml_devices.select_devices(devices, [name, "nvidia99"])

    assert selection.devices == tuple(d for d in devices if (d.parent_uuid or d.uuid) == gpu_uuid)
    assert selection.missing == ("nvidia99",)
