"""`--bridge on` with `--targets`: the start-up warning says it does nothing (the targets file names the runtimes
served, with no Kubernetes discovery and no `--namespaces`), and nothing must be done. It ran: the leader adopted
and wrote every RuntimeScale of every namespace into its ServingRuntime, runtimes the file does not name included,
while the log told the operator it would not."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.actuation.conftest import KEY
from tests.actuation.test_two_adapters import (
    exporters,
    healthy,
    holder,
    pod_writers,
    runtime_files,
    start_adapter,
    wait_for,
)
from tests.fakes.kube import FakeKubeApi

__all__ = ["exporters"]  # the fixture, used by name

pytestmark = pytest.mark.slow

RUNTIME = KEY.deployment.removeprefix("modelmesh-serving-")


async def test_bridge_on_with_a_targets_file_writes_no_serving_runtime(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    kube.add_serving_runtime(KEY.namespace, RUNTIME, replicas=2)
    kube.add_runtime_scale(KEY.namespace, RUNTIME, replicas=5)  # as an HPA left it
    kube.add_serving_runtime("other-team", RUNTIME, replicas=1)  # a namespace the file does not name
    kube.add_runtime_scale("other-team", RUNTIME, replicas=3)
    adapter = await start_adapter(tmp_path, 0, targets, kubeconfig, "--bridge", "on")
    try:
        await healthy(adapter)
        await wait_for(lambda: adapter.identity is not None and holder(kube) == adapter.identity, 15, "it leads")
        await wait_for(lambda: pod_writers(kube), 15, "it writes deletion costs: its writing side runs")
        await asyncio.sleep(2)  # four refreshes more, each a pass a running bridge would make
        assert kube.serving_runtime_replicas(KEY.namespace, RUNTIME) == 2
        assert kube.serving_runtime_replicas("other-team", RUNTIME) == 1
        log = adapter.log.read_text()
        assert "--bridge on does nothing with --targets" in log
        assert "RuntimeScale" not in log.replace("no RuntimeScale bridge", ""), log
    finally:
        await adapter.stop(signal.SIGKILL)
