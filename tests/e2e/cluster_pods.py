"""A ModelMesh pod as cluster mode sees it: a fake ModelMesh and a real exporter on the pod's own loopback IP,
and the Pod object in the fake Kubernetes API, so the adapter finds it by its runtime's selector."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port, running


async def start_pod(stack: contextlib.ExitStack, kube: FakeKubeApi, modelmesh: FakeModelMesh, *, namespace: str,
                    name: str, ip: str, labels: dict[str, str], exporter_port: int, logs: Path,
                    identity: bool = False, listed: bool = True,
                    exporter_env: dict[str, str] | None = None,
                    ports: Sequence[tuple[str, int]] = ()) -> web.AppRunner:
    """Serve `modelmesh` on `ip`, start its exporter (stopped with `stack`), add the Ready pod; returns the
    ModelMesh runner for the caller to clean up.

    `identity`: the exporter is told its pod's name, namespace and uid, as the shipped sidecar patch does from the
    downward API (False: an exporter from before, or a sidecar without those variables). `listed=False`: the pod
    is not in the API (yet): a pod that a lagging watch, or a test, has not listed, with a uid of its own.
    `exporter_env`: more of the exporter's variables (its TLS files: it is then awaited over https). `ports`: the
    (name, containerPort) the pod declares, as the sidecar patches declare the exporter's (none by default)."""
    mm_port = free_port()
    runner = await serve(modelmesh, ip, mm_port)
    uid = str(uuid.uuid4())
    if listed:  # not Ready until its containers run, as the kubelet reports it
        uid = kube.add_pod(namespace, name, labels={**labels, "pod-template-hash": "abc"}, ip=ip,
                           ready=False, ports=ports)["metadata"]["uid"]
    env = {"EXPORTER_POD_NAME": name, "EXPORTER_POD_NAMESPACE": namespace, "EXPORTER_POD_UID": uid} if identity else {}
    env.update(exporter_env or {})
    scheme = "https" if "EXPORTER_TLS_CERT_FILE" in env else "http"
    await asyncio.to_thread(stack.enter_context, running(
        ["exporter.cli", "--listen", f"{ip}:{exporter_port}", "--no-gpu",
         "--modelmesh-url", f"http://{ip}:{mm_port}/metrics", "--modelmesh-interval", "0.5",
         "--load-window", "3"],
        f"{scheme}://{ip}:{exporter_port}/healthz", logs / f"{name}.log", env))
    if listed:
        kube.set_ready(namespace, name, True)
    return runner
