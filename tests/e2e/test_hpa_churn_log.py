"""HPAs come and go on a large fleet for days (a runtime added, a maxReplicas raised, a team's namespace removed);
the adapter's log says what changed, not the bounds of every runtime in the cluster again at each change.

Was: each HPA event logged the whole table (`HPA bounds: {every runtime: (min, max)}`): at 5,000 runtimes some
300 KB a line, once per HPA edit, creation or deletion. Real processes: the fake Kubernetes API, the adapter in
cluster mode (`--kubeconfig`), HPAs created and deleted through the API as `kubectl` would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.resources import HORIZONTAL_POD_AUTOSCALERS
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "fleet"
FLEET = 300


def bounds_lines(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if "HPA bounds" in line]


async def eventually(check: Callable[[], list[str]], timeout: float = 20.0) -> list[str]:
    async with asyncio.timeout(timeout):
        while not (found := check()):
            await asyncio.sleep(0.2)
    return found


async def test_an_hpa_added_or_removed_logs_that_runtime_not_the_whole_fleet(tmp_path: Path) -> None:
    async with FakeKubeApi() as kube:
        for index in range(FLEET):
            kube.add_hpa(NS, f"runtime-{index}", max_replicas=10, target=("RuntimeScale", f"r{index}"),
                         metric_selector={"deployment": f"modelmesh-serving-r{index}"})
        port, log = free_port(), tmp_path / "adapter.log"
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--workers", "0",
                 "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "kubeconfig")), "--refresh-interval", "1",
                 "--leader-elect", "false", "--deletion-cost", "off"],
                f"https://127.0.0.1:{port}/healthz", log))
            [first] = await eventually(lambda: bounds_lines(log))
            assert str(FLEET) in first  # the first list: how many, not each of them
            assert len(first) < 1000, first

            kube.add_hpa(NS, "late", max_replicas=4, target=("RuntimeScale", "late"),
                         metric_selector={"deployment": "modelmesh-serving-late"})
            [added] = await eventually(lambda: [line for line in bounds_lines(log) if "serving-late" in line])
            kube._delete(HORIZONTAL_POD_AUTOSCALERS, (NS, "runtime-7"))
            [removed] = await eventually(lambda: [line for line in bounds_lines(log) if "serving-r7 " in line
                                                  or line.endswith("serving-r7")])
    for line in (added, removed):
        assert "modelmesh-serving-r1" not in line, line  # nothing about the runtimes that did not change
        assert len(line) < 400, line
    assert "(1, 4)" in added
