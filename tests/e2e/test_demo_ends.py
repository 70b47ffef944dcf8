"""How a demo run ends where it cannot end as it means to: killed with SIGKILL, which it cannot handle, or too short
for the story it tells. Apart from `test_demo.py` (one of the slowest files), so that they run beside it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.demo.demo_output import unwrap
from tests.e2e.test_demo import DEMO, adapter_has_started_its_worker, opening, processes_using, workdir_of
from tests.support.processes import poll
from tests.support.terminal import start_in_a_terminal

pytestmark = pytest.mark.slow


def running_in_group(group: int) -> list[str]:
    """`pid command` of each process of the group that still runs: a zombie (one whose parent, init here, has not
    reaped it yet) holds no port and uses no CPU."""
    found = subprocess.run(["ps", "-ww", "-o", "pid=,stat=,args=", "-g", str(group)], capture_output=True,
                           text=True).stdout
    return [line.strip() for line in found.splitlines() if not line.split()[1].startswith("Z")]


def port_is_free(port: int) -> bool:
    """Whether a new demo could listen on `port`: no process holds it. With SO_REUSEADDR, as the demo's servers
    bind: a connection the kill closed from the listening side lingers in TIME_WAIT for a minute, which refused a
    plain bind (a CI run under load: two of three ports "taken" by nothing running)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


KILLED_DEMO_GONE_S = 20.0
"""How soon what a SIGKILLed demo started must be gone: its processes stop on SIGTERM in a second or two; the
bound leaves a loaded machine room (the adapter gives its worker at most 10 s)."""


def listening_ports(processes: list[str]) -> list[int]:
    return [int(port) for port in re.findall(r"--listen 127\.0\.0\.1:(\d+)", "\n".join(processes))]


DEMO_AND_A_TAIL_OF_ITS_LOG = """
"$@" & demo=$!
until ls "$TMPDIR"/modelmesh-demo-*/processes.log >/dev/null 2>&1; do sleep 0.1; done
tail -f "$TMPDIR"/modelmesh-demo-*/processes.log >/dev/null & echo "demo $demo tail $!"
wait $demo
"""
"""A script that runs the demo and follows its log, as a user's would: without job control, one process group."""


def test_a_demo_killed_with_sigkill_leaves_no_process_port_or_directory_and_spares_a_tail_of_its_log(
        tmp_path: Path) -> None:
    """`kill -9` (the OOM killer) cannot be handled: the exporters, the adapter, its serving worker and resource
    tracker were left running for good, reparented to init, holding their ports and scraping fake pods that no
    longer existed, and the demo's directory was left in /tmp. A `tail -f` of its log started in the same script
    is the user's: it was SIGKILLed with the demo's processes (bash: "Killed  tail -f .../processes.log")."""
    script = start_in_a_terminal(["bash", "-c", DEMO_AND_A_TAIL_OF_ITS_LOG, "bash", *DEMO, "--duration", "60"],
                                 env={"TMPDIR": str(tmp_path)})
    try:
        assert script.stdout is not None
        said = ""
        # The script's line and the demo's "logs in" line come in either order (a reviewer: 3 runs in 8 read the
        # script's first and stopped there): read until both are in.
        while (not (found := re.search(r"demo (\d+) tail (\d+)", said)) or "/processes.log" not in said) and (
                line := script.stdout.readline()):
            said += line
        assert found, said
        workdir = workdir_of(said)
        demo, tail = int(found[1]), int(found[2])
        poll(lambda: adapter_has_started_its_worker(script.pid), timeout=60)
        ports = listening_ports(running_in_group(script.pid))
        assert len(ports) == 5, running_in_group(script.pid)  # four exporters and the adapter
        os.kill(demo, signal.SIGKILL)
        script.wait(timeout=10)
        deadline = time.monotonic() + KILLED_DEMO_GONE_S
        while ((left := [line for line in [*running_in_group(script.pid), *processes_using(workdir).splitlines()]
                         if not line.startswith(f"{tail} ")])
               or Path(workdir).exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        tail_ran_on = any(line.startswith(f"{tail} ") for line in running_in_group(script.pid))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.pid, signal.SIGKILL)  # the tail, or a failed step above: leave nothing running
        script.communicate(timeout=10)
    assert left == [], f"still running {KILLED_DEMO_GONE_S:g} s after the demo was killed: {left}"
    assert [port for port in ports if not port_is_free(port)] == []
    assert not Path(workdir).exists()
    assert tail_ran_on, "the user's tail -f of the demo's log was killed"


GROUP_KILLED_GONE_S = 5.0
"""How soon the directories of a demo killed with its whole group must be gone: nothing of it is left to stop."""


def test_a_sigkill_to_the_demos_whole_group_leaves_no_directory_of_it(tmp_path: Path) -> None:
    """`timeout -s KILL 14 modelmesh-autoscaler demo` (GNU timeout signals the group, as CI runners do) killed the
    janitor the demo leaves to remove its directory with the rest: `$TMPDIR/modelmesh-demo-*` and the adapter's
    `$TMPDIR/mm-autoscaler-cert-*` (its self-signed TLS key) were left for good."""
    demo = start_in_a_terminal([*DEMO, "--pods", "2", "--duration", "60"], env={"TMPDIR": str(tmp_path)})
    try:
        assert demo.stdout is not None
        workdir = workdir_of(opening(demo.stdout))
        poll(lambda: adapter_has_started_its_worker(demo.pid), timeout=60)
        ports = listening_ports(running_in_group(demo.pid))
        os.killpg(demo.pid, signal.SIGKILL)
        demo.wait(timeout=10)
        deadline = time.monotonic() + GROUP_KILLED_GONE_S
        # The janitor ends just after it removed the directory (a reviewer: 1 run in 5 found it still exiting).
        while ((left := sorted(path.name for path in tmp_path.iterdir())) or processes_using(workdir)) and (
                time.monotonic() < deadline):
            time.sleep(0.2)
        janitor = processes_using(workdir)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGKILL)  # a failed step above: leave nothing running into later tests
        demo.communicate(timeout=10)
    assert left == [], f"left in TMPDIR {GROUP_KILLED_GONE_S:g} s after the demo's group was killed: {left}"
    assert janitor == ""
    assert len(ports) == 3 and [port for port in ports if not port_is_free(port)] == []


def test_a_run_too_short_to_bring_pods_down_says_why_at_its_end() -> None:
    """`demo --pods 1 --duration 15` showed the scale-up and tables of the traffic drop, then "demo finished", with
    no scale-down and nothing saying why: the run ended while the adapter's served value still fell, slowly on
    purpose."""
    done = subprocess.run([*DEMO, "--pods", "1", "--duration", "12", "--interval", "6"], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    said_whole = unwrap(done.stdout)
    scaled_down = re.search(r"HPA: .*scale down", said_whole)
    said = re.search(r"\n\[ *\d+s\] the run ended \d+ s after the traffic dropped, before the HPA brought pods down: "
                     r"the adapter serves desired_replicas=[0-9.]+ at \d replicas, and falls slowly on purpose "
                     r"\(scale_down_tau_s 5 s\); a longer --duration \(e\.g\. --duration 40\) shows it\n"
                     r"\ndemo finished",
                     said_whole)
    assert bool(scaled_down) != bool(said), done.stdout  # a machine fast enough to scale down says nothing
