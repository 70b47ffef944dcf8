"""A running data path for end-to-end tests: fake ModelMesh → exporter → adapter, all real processes; and an
adapter in cluster mode, over the fake Kubernetes API."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.kube import FakeKubeApi
from tests.fakes.node_clock import clock_off_env
from tests.fakes.nvml import FakeNvml
from tests.support.api_peek import kubectl_reads, peek_raw
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import Server, all_running, free_port, http_post_json, running, stop
from tests.support.quantities import quantity_value

DEPLOYMENT = "modelmesh-serving-demo"


@dataclass
class DataPath:
    modelmesh_urls: list[str]
    exporter_urls: list[str]
    adapter_url: str
    kubeconfig: Path
    log_dir: Path
    exporters: list[subprocess.Popen[bytes]] = field(default_factory=list)
    gpus: list[FakeNvml] = field(default_factory=list)
    exporter_commands: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    stack: ExitStack | None = None
    adapter: subprocess.Popen[bytes] | None = None

    @property
    def modelmesh_url(self) -> str:
        return self.modelmesh_urls[0]

    @property
    def exporter_url(self) -> str:
        return self.exporter_urls[0]

    def prometheus_target_labels(self) -> dict[str, dict[str, str]]:
        """Each exporter's scrape target (host:port) with the labels the adapter's Prometheus queries select a
        pod by, as the shipped scrape config relabels them (`PrometheusServer(target_labels=...)`)."""
        return {url.removeprefix("http://").removesuffix("/metrics"): {"namespace": "default", "pod": f"pod-{i}"}
                for i, url in enumerate(self.exporter_urls)}

    def set_load(self, pod: int = 0, **load: float | str | None) -> None:
        http_post_json(self.modelmesh_urls[pod].replace("/metrics", "/control"), json.dumps(load))

    def kill_exporter(self, pod: int) -> None:
        stop(self.exporters[pod])

    def restart_exporter(self, pod: int) -> None:
        """Stop a pod's exporter and start a new one on the same port: no history, no rates at first."""
        stop(self.exporters[pod])
        assert self.stack is not None
        args, env = self.exporter_commands[pod]
        self.exporters[pod] = self.stack.enter_context(running(
            args, self.exporter_urls[pod], self.log_dir / f"exporter-{pod}.log", env=env))

    def reset_counters(self, pod: int) -> None:
        """The pod's ModelMesh container restarts: its counters start again from zero."""
        http_post_json(self.modelmesh_urls[pod].replace("/metrics", "/reset"), "{}")

    def adapter_log(self) -> str:
        return (self.log_dir / "adapter.log").read_text(errors="replace")

    def metric_path(self, metric: str, selector: str = f"deployment%3D{DEPLOYMENT}") -> str:
        return f"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{metric}?labelSelector={selector}"

    def served(self, metric: str) -> tuple[int, float | str]:
        """What kubectl reads: (0, value) or (exit code, kubectl's error text)."""
        return _reading(*get_raw(self.kubeconfig, self.metric_path(metric)))

    def value(self, metric: str) -> float | None:
        return _value(self.served(metric))

    def answered(self, metric: str) -> tuple[int, float | str]:
        """What the adapter answers kubectl's `get --raw` of `metric` (the same GET), read in this process
        (`peek_raw`): (0, value) or (the HTTP status, its Status body, whose reason kubectl prints:
        ServiceUnavailable for a 503). For polling; a test asserts on what kubectl reads (`served`)."""
        return _reading(*peek_raw(self.kubeconfig, self.metric_path(metric)))

    def answered_value(self, metric: str) -> float | None:
        """`value`, read in this process (`answered`): None where the adapter answers an error."""
        return _value(self.answered(metric))

    def until_served(self, metric: str, check: Callable[[float | None], bool], timeout: float) -> float | None:
        """Once kubectl reads a value of `metric` that passes `check` (None: an error), that value; else an
        AssertionError after `timeout`. Awaited in this process, then read with kubectl (`kubectl_reads`)."""
        return _value(_reading(*kubectl_reads(self.kubeconfig, self.metric_path(metric),
                                              lambda code, body: check(_value(_reading(code, body))), timeout)))


def _reading(code: int, body: Any) -> tuple[int, float | str]:
    """(0, the value) of an external metric list read, else (the code, the error's text)."""
    if code != 0:
        return code, str(body)
    value: str = body["items"][0]["value"]
    return 0, quantity_value(value)


def _value(reading: tuple[int, float | str]) -> float | None:
    code, value = reading
    return value if code == 0 and isinstance(value, float) else None


@contextmanager
def data_path_running(
    workdir: Path, pods: int = 1, rps: float = 50.0, adapter_args: Sequence[str] = (),
    policy: Mapping[str, object] | None = None, gpus: Sequence[FakeNvml] | None = None,
    clocks_off_s: Sequence[float] = (),
    modelmesh_args: Sequence[Sequence[str]] = (),
    adapter_env: Mapping[str, str] | None = None,
    exporter_args: Sequence[Sequence[str]] = (),
) -> Iterator[DataPath]:
    """`pods` fake ModelMesh containers (https), one exporter each, and one adapter scraping them.

    `modelmesh_args`: per pod, more arguments of its fake ModelMesh (`--model-prefix shared`, say).
    `exporter_args`: per pod, more arguments of its exporter, after the usual ones (a later flag wins).
    `adapter_env`: more environment for the adapter (libfaketime's, to move its clock: `tests.fakes.node_clock`).

    `gpus`: one fake NVML per pod, loaded by that pod's exporter (else the exporters run with `--no-gpu`).
    `clocks_off_s`: per pod, how far its node's clock is off (`tests.fakes.node_clock`; 0 or none: right)."""
    with ExitStack() as stack:
        modelmesh_urls, exporter_urls, exporter_ports, cert_dirs = [], [], [], []
        fakes: list[Server] = []
        for index in range(pods):
            mm_port, exporter_port = free_port(), free_port()
            exporter_ports.append(exporter_port)
            modelmesh_urls.append(f"https://127.0.0.1:{mm_port}/metrics")
            exporter_urls.append(f"http://127.0.0.1:{exporter_port}/metrics")
            cert_dirs.append(workdir / f"mm-tls-{index}")
            fakes.append(Server(
                ["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm_port}", "--rps", str(rps),
                 "--cert-dir", str(cert_dirs[index]),
                 *(modelmesh_args[index] if index < len(modelmesh_args) else ())],
                modelmesh_urls[index], workdir / f"modelmesh-{index}.log",
            ))
        # Every fake ModelMesh answers (and has written its certificate) before any exporter starts, and every
        # exporter before the adapter, as when they were started one by one; each kind starts all at once.
        stack.enter_context(all_running(fakes))
        commands: list[tuple[list[str], dict[str, str]]] = []
        for index in range(pods):
            gpu_args = ["--no-gpu"] if gpus is None else ["--gpu-window", "1", "--gpu-interval", "0.2"]
            env = {} if gpus is None else gpus[index].env()
            if index < len(clocks_off_s) and clocks_off_s[index]:
                env |= clock_off_env(clocks_off_s[index])
            args = ["exporter.cli", "--listen", f"127.0.0.1:{exporter_ports[index]}",
                    "--modelmesh-url", modelmesh_urls[index],
                    "--modelmesh-ca-file", str(cert_dirs[index] / "tls.crt"), *gpu_args,
                    "--modelmesh-interval", "0.5", "--load-window", "3",
                    *(exporter_args[index] if index < len(exporter_args) else ())]
            commands.append((args, env))
        exporters = stack.enter_context(all_running([
            Server(args, exporter_urls[index], workdir / f"exporter-{index}.log", env)
            for index, (args, env) in enumerate(commands)]))
        targets = workdir / "targets.yaml"
        targets.write_text(yaml.safe_dump({"runtimes": [{
            "namespace": "default", "deployment": DEPLOYMENT,
            "pods": [{"name": f"pod-{i}", "url": url} for i, url in enumerate(exporter_urls)],
        }]}))
        adapter_url, adapter = stack.enter_context(adapter_running(workdir, targets, adapter_args, policy, adapter_env))
        yield DataPath(
            modelmesh_urls, exporter_urls, adapter_url, write_kubeconfig(workdir / "kubeconfig", adapter_url),
            workdir, list(exporters), list(gpus or ()), commands, stack, adapter,
        )


@contextmanager
def adapter_running(
    workdir: Path, targets: Path, adapter_args: Sequence[str] = (), policy: Mapping[str, object] | None = None,
    adapter_env: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`data_path_running`'s adapter, reading the exporters of `targets`: its URL and process. Its policy file
    and its log (adapter.log) are in `workdir`."""
    port = free_port()
    config_args: list[str] = []
    if policy is not None:
        (workdir / "policy.yaml").write_text(yaml.safe_dump({"defaults": dict(policy)}))
        config_args = ["--config", str(workdir / "policy.yaml")]
    with running(
        ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
         "--targets", str(targets), "--refresh-interval", "1", "--window", "3", *config_args, *adapter_args],
        f"https://127.0.0.1:{port}/healthz", workdir / "adapter.log", dict(adapter_env or {}),
    ) as adapter:
        yield f"https://127.0.0.1:{port}", adapter


@contextmanager
def another_adapter(
    path: DataPath, workdir: Path, adapter_args: Sequence[str] = (), policy: Mapping[str, object] | None = None,
    adapter_env: Mapping[str, str] | None = None,
) -> Iterator[DataPath]:
    """One more adapter, with its own flags, reading the exporters of a running `path` (its targets file): the
    data path as seen through it (its log and kubeconfig in `workdir`). For the tests of one file that only read
    the same pods: their fake ModelMesh and exporter processes started once (a data path of 3 pods is 6
    processes, about 2 CPU-s to start), each test's adapter its own."""
    with adapter_running(workdir, path.log_dir / "targets.yaml", adapter_args, policy, adapter_env) as (url, adapter):
        yield replace(path, adapter_url=url, kubeconfig=write_kubeconfig(workdir / "kubeconfig", url),
                      log_dir=workdir, adapter=adapter)


@pytest.fixture(scope="module")
def data_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPath]:
    with data_path_running(tmp_path_factory.mktemp("data-path"), adapter_args=["--scale-down-tau", "1"]) as path:
        yield path


# ---- an adapter in cluster mode: runtimes found through the fake Kubernetes API ----


@asynccontextmanager
async def cluster_adapter_running(workdir: Path, deployment: str, namespaces: Sequence[str],
                                  adapter_args: Sequence[str] = ()) -> AsyncIterator[Path]:
    """An adapter (`--insecure-dev`, no leader election) discovering runtimes through the fake Kubernetes API, where
    the runtime Deployment `deployment` is scaled to zero in each of `namespaces`: kubectl's kubeconfig for the
    adapter. Its log is `workdir / "adapter.log"`."""
    port = free_port()
    labels = {"modelmesh-service": "modelmesh-serving", "name": deployment}
    async with FakeKubeApi() as kube:
        for namespace in namespaces:
            kube.add_deployment(namespace, deployment, replicas=0, labels=labels, selector=labels)
        with running(
            ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
             "--kubeconfig", str(kube.write_kubeconfig(workdir / "cluster.kubeconfig")),
             *adapter_args, "--refresh-interval", "1", "--leader-elect", "false"],
            f"https://127.0.0.1:{port}/healthz", workdir / "adapter.log",
        ):
            yield write_kubeconfig(workdir / "adapter.kubeconfig", f"https://127.0.0.1:{port}")


async def external_metric_once_refreshed(kubeconfig: Path, namespace: str, metric: str,
                                         selector: str | None) -> tuple[int, Any]:
    """`kubectl get --raw` of an external metric (`selector`: the labelSelector, URL-encoded, or None for none),
    once the adapter answers with more than its first-refresh 503: (exit code, body or kubectl's error)."""
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
    path += f"?labelSelector={selector}" if selector else ""
    # Until the adapter has values: before its first refresh, and while a refresh starved of CPU is late (on a
    # loaded CI machine the adapter's stall guard answered "not been refreshed for 12 s" once and the test took
    # that for the answer), it answers 503 with no word on the runtime. A generous deadline, not a count of tries.
    deadline = time.monotonic() + 120
    while True:
        code, body = await asyncio.to_thread(get_raw, kubeconfig, path)
        if "first refresh" not in str(body) and "have not been refreshed" not in str(body):
            return code, body
        if time.monotonic() > deadline:
            raise AssertionError(f"no refresh: {body}")
        await asyncio.sleep(0.5)
