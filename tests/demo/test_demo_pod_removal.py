"""Removing a pod whose exporter has not started yet must not stop the demo while the exporter is made to end.

The removal waited for the exporter on the demo's one event loop, up to `PROCESS_STOP_S` (15 s) for an exporter that
does not end on SIGTERM yet (a stopped one, as the e2e fixture holds a new pod's exporter to play a slow machine):
meanwhile the fake ModelMesh pods, served on that loop, answered no scrape, the adapter's values went unknown (503)
and came back at the count held before, 8, and the HPA scaled 7 -> 8 right after the traffic drop, starting a pod
the next scale-down removed before it ever started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoFleet, DemoPod
from tests.support.waiting import eventually


async def test_the_demo_runs_on_while_a_removed_pods_exporter_is_made_to_end(tmp_path: Path) -> None:
    fleet = DemoFleet(tmp_path, {})
    exporter = subprocess.Popen(["sleep", "60"])
    os.kill(exporter.pid, signal.SIGSTOP)  # SIGTERM stays pending: it ends only once continued, or killed
    # Stopped only once the kernel says so: a SIGTERM before that ended it at once (1 run in 6 under load).
    stat = Path(f"/proc/{exporter.pid}/stat")
    for _ in range(500):
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the exporter never stopped on SIGSTOP")
    pod = DemoPod("demo-4", FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6)), 0, 0,
                  created_at=time.time(), models="demo-0", process=exporter)
    fleet.pods.append(pod)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.1)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        # At once, the HPA's line coming with its scale: asked of the exporter, still stopped as the removal returns
        # (the stop waits PROCESS_STOP_S, 15 s, to kill it), not of a second of a loaded machine's clock.
        await asyncio.wait_for(fleet.remove_pod("demo-4"), 30)
        assert exporter.poll() is None, "the removal returned only once the stopped exporter was killed"
        assert pod not in fleet.pods  # gone from the targets at once, as a terminating pod
        # The loop runs on while the exporter is still stopped: asked of the exporter, not of how often a loaded
        # machine ran the loop in 1.5 s of the clock. Waited for on the loop, the exporter was killed first (15 s).
        await eventually(lambda: ticks >= 5)
        assert exporter.poll() is None, f"the loop ran {ticks} times only once the stopped exporter was killed"
        os.kill(exporter.pid, signal.SIGCONT)
        await asyncio.wait_for(asyncio.gather(*fleet.stopping), 10)
    finally:
        ticker.cancel()
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()
    assert exporter.returncode is not None
