"""The demo's table lists the pods that run when it is printed, as its user reads it under the HPA's lines.

`Demo.report` took the fleet's pods, then awaited the exporters' rates, the served values and /debug; the HPA loop
removed a pod meanwhile, and the table printed right under "[  31s] HPA: ... removed demo-5 (...)" still listed
demo-5, and counted it in "replicas 6 (6 ready)". A pod a scale-up started meanwhile was left out the same way.

These drive the demo's own fleet (fake ModelMesh pods, their real exporter processes, the real adapter) and change it
while the table's answers are awaited, as `Demo.autoscale` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from autoscaler.demo.run import Demo

pytestmark = pytest.mark.slow


def listed_pods(table: str) -> list[str]:
    return re.findall(r"^  (demo-\d+) ", table, re.MULTILINE)


async def table_while(demo: Demo, change: Callable[[], Awaitable[object]]) -> str:
    """The table `Demo.report` prints when `change` happens to the fleet once it has begun, before its answers
    have come."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        async with aiohttp.ClientSession() as session:
            report = asyncio.create_task(demo.report(session))
            await asyncio.sleep(0)  # report has taken the fleet's pods and awaits the exporters' rates
            assert not report.done()
            await change()
            await report
    return printed.getvalue()


async def test_a_pod_removed_while_the_table_is_gathered_is_not_listed(tmp_path: Path) -> None:
    demo = Demo(4, 60.0, 3.0, tmp_path)
    async with demo.fleet.running(4):
        table = await table_while(demo, lambda: demo.fleet.remove_pod("demo-3"))
    assert listed_pods(table) == ["demo-0", "demo-1", "demo-2"], table
    assert "  replicas 3 (3 ready)\n" in table, table


async def test_a_pod_started_while_the_table_is_gathered_is_listed_as_starting(tmp_path: Path) -> None:
    demo = Demo(4, 60.0, 3.0, tmp_path)
    async with demo.fleet.running(4):
        table = await table_while(demo, lambda: demo.fleet.add_pod())
    assert listed_pods(table) == ["demo-0", "demo-1", "demo-2", "demo-3", "demo-4"], table
    assert re.search(r"^  replicas 5 \(", table, re.MULTILINE), table
