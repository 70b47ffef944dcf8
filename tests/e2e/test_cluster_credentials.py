"""`serve` against a Kubernetes API whose token rotates under it: a kubeconfig user with `tokenFile` (a projected
service-account token handed to an adapter running outside the cluster, or in another one). The old token
expires; kubectl would carry on. The adapter must too: the leader keeps renewing its Lease (else it stops
writing deletion costs and bridging RuntimeScales, and says "not renewed within 10.0 s; stopping writes")."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
LEASE = "modelmesh-autoscaler"


async def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.2)


def renewals(kube: FakeKubeApi, token: str) -> int:
    """Lease writes the server accepted with `token`."""
    return sum(1 for r in kube.requests if r.resource == "leases" and r.method == "PUT" and r.status == 200
               and r.headers.get("Authorization") == f"Bearer {token}")


async def test_the_leader_keeps_its_lease_after_its_token_file_rotates(tmp_path: Path) -> None:
    adapter_port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    async with FakeKubeApi(require_token="token-1") as kube:
        kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=1)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS, token_file=token_file)
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                 "--kubeconfig", str(kubeconfig), "--refresh-interval", "1", "--leader-elect", "true",
                 # A renew deadline of 3 s ran out on a CI machine loaded 5 times over, the fake API (in the test's
                 # own process) answering late: "not renewed within 3.0 s; stopping writes", the rotation unseen.
                 "--leader-elect-retry-period", "1", "--leader-elect-renew-deadline", "6",
                 "--leader-elect-lease-duration", "8"],
                f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
            await until(lambda: renewals(kube, "token-1") >= 2)

            token_file.write_text("token-2")  # the new token is written; the old one expires
            kube.require_token = "token-2"

            try:
                await until(lambda: renewals(kube, "token-2") >= 8)  # past the renew deadline: still leading
            except TimeoutError:
                said = [line for line in (tmp_path / "adapter.log").read_text().splitlines() if "lease" in line]
                pytest.fail("no Lease renewal with the rotated token; the adapter said:\n" + "\n".join(said[-5:]))
            holder = kube.stored("leases", NS, LEASE)["spec"]["holderIdentity"]
            assert holder, "the Lease is held"
    log = (tmp_path / "adapter.log").read_text()
    assert "stopping writes" not in log
