"""The Leases the adapter writes are ones kube-apiserver decodes and validates: MicroTime with exactly six
fractional digits (Go's layout; `datetime.isoformat()` drops the fraction at 0 microseconds), whole-second
durations above 0, transitions of at least 0. The fake refuses the others as the server does (400, 422), so
the election tests fail where a cluster would refuse the adapter's Lease."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.kube.client import KubeClient
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.timestamps import micro_time
from tests.fakes.kube import FakeKubeApi
from tests.fakes.test_kube_custom_resources import kubectl

NS = "modelmesh-autoscaler"
LEASE = """apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: by-hand, namespace: modelmesh-autoscaler}}
spec: {{holderIdentity: me, leaseDurationSeconds: {duration}, renewTime: "{renew}"}}
"""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
async def client(kube: FakeKubeApi, tmp_path: Path) -> AsyncIterator[KubeClient]:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)
    connected = await KubeClient.connect(kubeconfig, user_agent="modelmesh-autoscaler/test", timeout_s=2.0)
    yield connected
    await connected.close()


@pytest.mark.parametrize(("duration", "renew", "refusal"), [
    (15, "2024-01-02T03:04:05Z", 'Lease in version "v1" cannot be handled as a Lease: parsing time '
                                 '"2024-01-02T03:04:05Z"'),
    (15, "2024-01-02T03:04:05.1234Z", 'parsing time "2024-01-02T03:04:05.1234Z" as "2006-01-02T15:04:05.000000Z07:00"'),
    (1.5, "2024-01-02T03:04:05.000000Z", "cannot unmarshal number 1.5 into Go struct field "
                                         "LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (0, "2024-01-02T03:04:05.000000Z", 'The Lease "by-hand" is invalid: spec.leaseDurationSeconds: Invalid value: 0: '
                                       "must be greater than 0"),
])
async def test_kubectl_create_of_a_lease_the_server_cannot_take_is_refused(
    kube: FakeKubeApi, tmp_path: Path, duration: float, renew: str, refusal: str
) -> None:
    manifest = tmp_path / "lease.yaml"
    manifest.write_text(LEASE.format(duration=duration, renew=renew))

    code, _, stderr = await kubectl(kube, tmp_path, "create", "-f", str(manifest), "--validate=false")

    assert code != 0
    assert refusal in stderr
    assert kube.get("leases", NS, "by-hand") is None


async def test_a_lease_with_six_digits_and_an_offset_is_taken(kube: FakeKubeApi, tmp_path: Path) -> None:
    manifest = tmp_path / "lease.yaml"
    manifest.write_text(LEASE.format(duration=15, renew="2024-01-02T03:04:05.000000+00:00"))

    code, _, stderr = await kubectl(kube, tmp_path, "create", "-f", str(manifest), "--validate=false")

    assert code == 0, stderr


_NAMES = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.floats(min_value=0, max_value=2**33, allow_nan=False)
       | st.integers(min_value=0, max_value=2**33).map(float))
async def test_every_lease_time_the_adapter_writes_is_one_the_server_parses(
    client: KubeClient, moment: float
) -> None:
    name = f"lease-{next(_NAMES)}"
    stamp = micro_time(moment)
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 1, "acquireTime": stamp, "renewTime": stamp,
            "leaseTransitions": 0}

    try:
        created = await client.create_lease(NS, {"metadata": {"name": name, "namespace": NS}, "spec": spec})
        renewed = await client.replace_lease(NS, name, {**created, "spec": {**spec, "leaseTransitions": 1}})
    except KubeApiError as error:
        pytest.fail(f"the API server refused the Lease written at {moment!r} ({stamp}): {error}")

    assert renewed["spec"]["renewTime"] == stamp
