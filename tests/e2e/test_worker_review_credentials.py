"""`serve --workers N` and the Kubernetes API its serving workers call for TokenReviews and SubjectAccessReviews.

What a worker's reviews need (the API server's address, its CA, the adapter's bearer token, or the file the
kubelet rotates it in) comes from the refresh process as plain facts (`autoscaler.kube.review_connection`), so
a worker never imports the Kubernetes library: about 20 MiB of memory in each (`bench/bench_memory.py`). Which
process imported what is seen from outside through the audit hook of `tests/support/import_audit`.

The reviews carry the adapter's own token: a real API server answers 401 to a review without one (the fake does
with `require_token`), and the adapter could not even read the authentication ConfigMap to start."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port, http_get, running, serving_workers
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

AUDIT = Path(__file__).resolve().parents[1] / "support" / "import_audit"
DISCOVERY = "/apis/external.metrics.k8s.io/v1beta1"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"


def write_targets(path: Path) -> Path:
    path.write_text("runtimes:\n- namespace: default\n  deployment: modelmesh-serving-demo\n  pods:\n"
                    f"  - name: pod-0\n    url: http://127.0.0.1:{free_port()}/metrics\n")
    return path


async def get_as(url: str, token: str) -> int:
    """The status of a GET with `token`, made off the event loop the fake Kubernetes API answers on."""
    status, _ = await asyncio.to_thread(http_get, url, headers={"Authorization": f"Bearer {token}"})
    return status


@contextlib.asynccontextmanager
async def adapter_with_two_workers(kube: FakeKubeApi, tmp_path: Path,
                                   token_file: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    """`serve --workers 2` with authentication, its kubeconfig user reading its token from `token_file`; every
    module of the Kubernetes library its processes import is listed under tmp_path/imports (`imported`)."""
    kube.tokens = {f"hpa-token-{n}": (HPA_USER, ["system:serviceaccounts"]) for n in (1, 2)}
    kube.allow(user=HPA_USER)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", token_file=token_file)
    (tmp_path / "imports").mkdir()
    port = free_port()
    with contextlib.ExitStack() as stack:
        adapter = await asyncio.to_thread(stack.enter_context, running(
            ["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig),
             "--targets", str(write_targets(tmp_path / "targets.yaml")), "--workers", "2", "--deletion-cost", "off"],
            f"https://127.0.0.1:{port}/healthz", tmp_path / "adapter.log",
            env={"PYTHONPATH": str(AUDIT), "IMPORT_AUDIT_DIR": str(tmp_path / "imports")}))
        yield adapter, f"https://127.0.0.1:{port}"


def imported(tmp_path: Path, pid: int) -> list[str]:
    path = tmp_path / "imports" / str(pid)
    return path.read_text().split() if path.exists() else []


async def test_the_workers_reviews_carry_the_adapters_token_and_its_rotation(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("adapter-token-1")
    async with FakeKubeApi(require_token="adapter-token-1") as kube, \
            adapter_with_two_workers(kube, tmp_path, token_file) as (_, url):
        assert await get_as(url + DISCOVERY, "hpa-token-1") == 200

        token_file.write_text("adapter-token-2")  # the kubelet's rotation; the old token expires
        kube.require_token = "adapter-token-2"

        assert await get_as(url + DISCOVERY, "hpa-token-2") == 200  # a token not reviewed yet
        review = [r for r in kube.requests if r.resource == "tokenreviews"][-1]
        assert (review.status, review.headers.get("Authorization")) == (201, "Bearer adapter-token-2")


async def test_a_worker_serves_an_authenticated_request_without_importing_the_kubernetes_library(
        tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("adapter-token")
    async with FakeKubeApi() as kube, adapter_with_two_workers(kube, tmp_path, token_file) as (adapter, url):
        # /healthz answered by one worker: the other may still be starting on a loaded machine
        await eventually(lambda: len(serving_workers(adapter.pid)) == 2, 60)
        workers = serving_workers(adapter.pid)
        for _ in range(10):  # new connections, which the kernel spreads over the workers
            assert await get_as(url + DISCOVERY, "hpa-token-1") == 200
        assert [r.status for r in kube.requests if r.resource == "subjectaccessreviews"][:1] == [201]

        assert "kubernetes.aio.config" in imported(tmp_path, adapter.pid)  # the refresh process loads it
        assert {worker: imported(tmp_path, worker) for worker in workers} == {worker: [] for worker in workers}
