"""A process that the demo's processes start, left running when its parent ends (the adapter killed after its
stop timeout, its serving worker still running; its resource tracker, which ends only after it): the demo stops
it too, since `modelmesh-autoscaler demo` says it leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.terminal import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="orphans are adopted on Linux only")

DEMO_PROCESS = textwrap.dedent("""
    import subprocess, sys
    from autoscaler.demo.orphans import adopt_orphans, stop_adopted

    adopt_orphans()  # as `run_demo` does, before it starts anything
    # a child that starts one of its own, which ignores SIGTERM (as a worker still importing may take a while,
    # or a resource tracker never does), and ends at once, as a killed adapter does
    child = subprocess.Popen([sys.executable, "-c", '''
    import signal, subprocess, sys
    left = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print(flush=True); time.sleep(120)"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    left.stdout.readline()
    print(left.pid, flush=True)
    '''], stdout=subprocess.PIPE, text=True)
    print(child.stdout.readline().strip(), flush=True)
    child.wait()
    stop_adopted(timeout=1)
""")


def test_a_process_left_by_a_process_the_demo_started_is_stopped_with_it() -> None:
    done = subprocess.run([sys.executable, "-c", DEMO_PROCESS], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    left = int(done.stdout.split()[0])
    alive = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-p", str(left)], capture_output=True, text=True).stdout
    if alive.strip():
        os.kill(left, 9)
    assert alive.strip() == "", f"left running after the demo ended: {alive}"


def test_the_demo_waits_for_the_adapter_longer_than_the_adapter_waits_for_its_workers() -> None:
    """Killed before its own deadline for its serving workers, the adapter leaves them (and its temporary
    directories) for `stop_adopted` to kill: the demo's wait must outlast the adapter's."""
    from autoscaler.demo.fleet import PROCESS_STOP_S
    from autoscaler.worker_pool import STOP_TIMEOUT_S

    assert PROCESS_STOP_S > STOP_TIMEOUT_S
