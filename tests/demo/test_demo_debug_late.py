"""The demo's scale line where the adapter's /debug answers late (2 cores busy): the count still comes from the
metrics API, and the line says plainly that why it scaled is unknown this time, and where the count came from.

It read "(the adapter's /debug did not answer: no reason to show)": a reader took "no reason" for the adapter's
own account (no term decided), and the count's source went unsaid.

Here the demo reads a stand-in adapter (https, as the real) whose metrics API serves 3 replicas at once and whose
/debug answers only after the demo has stopped waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.demo import run
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh
from autoscaler.demo.fleet import DEPLOYMENT, NAMESPACE, DemoPod, free_port
from autoscaler.demo.run import Demo
from autoscaler.names import GROUP_VERSION, ServedMetric
from tests.demo.demo_output import unwrap

WAITED_S = 0.3
"""How long the demo waits for the stand-in adapter here (its own wait, shortened for the test)."""


async def test_a_late_debug_answer_says_why_is_unknown_this_time_and_where_the_count_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def late_debug(_: web.Request) -> web.Response:
        await asyncio.sleep(5 * WAITED_S)
        return web.json_response({"known": True, "pods": []})

    async def desired(_: web.Request) -> web.Response:
        return web.json_response({"items": [{"value": "3"}]})

    app = web.Application()
    app.router.add_get(f"/debug/runtimes/{NAMESPACE}/{DEPLOYMENT}", late_debug)
    app.router.add_get(f"/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/{ServedMetric.DESIRED_REPLICAS.value}", desired)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    certs = generate_self_signed(tmp_path / "tls", "adapter", ["127.0.0.1"])
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(certs.cert_file, certs.key_file)).start()
    monkeypatch.setattr(run, "ADAPTER_TIMEOUT_S", WAITED_S)
    monkeypatch.setattr(run, "HPA_SYNC_S", 0.1)
    demo = Demo(4, 60.0, 3.0, tmp_path)
    demo.fleet.adapter_port = runner.addresses[0][1]
    demo.fleet.pods = [DemoPod(f"demo-{i}", FakeModelMesh(), free_port(), free_port(), float(i), f"demo-{i}",
                               ready=True) for i in range(4)]
    demo.costs = {"demo-0": (700, 6), "demo-1": (700, 6), "demo-2": (700, 6), "demo-3": (600, 6)}  # read before
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            async with aiohttp.ClientSession() as session:
                hpa = asyncio.create_task(demo.autoscale(session))
                try:
                    async with asyncio.timeout(60):
                        while "HPA: " not in printed.getvalue():
                            await asyncio.sleep(0.05)
                finally:
                    hpa.cancel()
                    await asyncio.gather(hpa, return_exceptions=True)
    finally:
        await runner.cleanup()
    line = re.search(r"HPA: .*", unwrap(printed.getvalue()))
    assert line, printed.getvalue()
    assert "scale down 4 -> 3 (the adapter's /debug did not answer within 0.3 s: why it scaled is unknown this " \
           "time; the count is the metrics API's); removed demo-3 (cost 600;" in line.group(), line.group()
