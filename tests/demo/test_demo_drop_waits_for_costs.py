"""The demo's traffic drop waits for the adapter to rank the pods a scale-up started, as its user reads it.

It waited for them to be Ready only. A pod joins the adapter's targets once its exporter answers, and the adapter
ranks it at its next refresh: a drop in between met a Ready pod without a deletion cost, which the ReplicaSet reads
as 0, and the HPA's first scale-down removed the pod the scale-up had just added, unranked, rather than the least
needed one the table had shown.

This drives the demo's fleet (fake ModelMesh pods, their real exporters, the real adapter) and the demo's own loop
step (`Demo.advance`), at the moment the drop is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from pathlib import Path

import aiohttp
import pytest

from autoscaler.demo.run import Demo
from autoscaler.demo.scenario import PHASES
from tests.demo.demo_output import unwrap

pytestmark = pytest.mark.slow

HOT, DROP = PHASES[1], PHASES[2]
DURATION = 60.0


async def test_the_drop_waits_until_the_adapter_ranks_a_pod_the_scale_up_started(tmp_path: Path) -> None:
    demo = Demo(4, DURATION, 3.0, tmp_path, start_timeout=120.0)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        async with demo.fleet.running(4), aiohttp.ClientSession() as session:
            await demo.first_value(session)
            demo.apply_phase(HOT)
            added = await demo.fleet.add_pod(wait=False)
            added.ready = True  # Ready: its exporter answered; not yet in the targets the adapter reads
            demo.started = time.monotonic() - DROP.starts_at * DURATION  # the drop is due
            await demo.advance(session)
            await demo.report(session)
            held = unwrap(printed.getvalue())
            demo.fleet.write_targets()  # the adapter reads the pod at its next refresh, and ranks it
            async with asyncio.timeout(60):
                while demo.phase is not DROP:
                    await asyncio.sleep(0.5)
                    await demo.advance(session)
            await demo.report(session)
    assert f"] {HOT.title}\n  replicas 5 (5 ready)" in held, held
    assert "traffic drops once demo-4 has started and the adapter has ranked it (waiting at most 120 s" in held, held
    after = unwrap(printed.getvalue())[len(held):]
    assert f"] {DROP.title}\n  replicas 5 (5 ready)" in after, after
    assert "demo-0, demo-1" not in held, "the pods the adapter ranked do not hold the drop"
