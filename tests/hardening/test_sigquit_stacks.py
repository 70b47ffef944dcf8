"""`kill -QUIT` on a process that looks hung writes its Python stacks to stderr, and it goes on serving.

At Python's default, SIGQUIT killed the adapter or the exporter with a core dump and nothing in the log (the pod
restarted, the evidence went with it). An operator sends it as to a Go program (`kubectl exec ... -- kill -QUIT 1`):
only PID 1 gets it, so `serve --workers N`'s refresh process passes it on to its serving workers, and each
process's block is headed with its role and pid. The real processes run here and are sent the signal.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
from pathlib import Path

from tests.exporter.gpu_rig import exporter_in_a_hung_pass
from tests.hardening.adapter import adapter_running
from tests.support.processes import free_port, http_get, running, serving_workers, wait_until_logged

STILL_SERVING = "written to stderr; still serving (SIGTERM stops it)"
REFRESHING = "scrape of default/modelmesh-serving-demo/pod-0 failed"
"""Logged by the first refresh: the refresh task runs (the workers answer /healthz before it starts)."""


def _block(text: str, role: str, pid: int) -> str:
    """The stack block of `role` (pid `pid`) in the log; fails naming what is there when it is missing."""
    header = f"SIGQUIT: the Python stacks of the {role}, pid {pid}: every thread, then every asyncio task\n"
    assert header in text, text
    return text.split(header, 1)[1].split(f"end of the stacks of the {role}, pid {pid}; it goes on serving", 1)[0]


def test_the_exporter_writes_every_thread_and_task_stack_and_keeps_serving(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", log) as exporter:
        exporter.send_signal(signal.SIGQUIT)
        wait_until_logged(exporter, log, STILL_SERVING)
        assert http_get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        assert exporter.poll() is None
        block = _block(log.read_text(), "exporter", exporter.pid)
    assert re.search(r"Current thread 0x[0-9a-f]+ \(most recent call first\):", block), block
    assert re.search(r'File ".*exporter/startup\.py", line \d+ in serve', block), block
    assert "Stack for <Task pending name='ModelMeshCollector.run'" in block, block


def test_the_exporter_shows_the_nvml_call_its_gpu_thread_is_stuck_in(tmp_path: Path) -> None:
    """What an operator looks for: the driver call that never returns, in the thread of the GPU pass."""
    with exporter_in_a_hung_pass(tmp_path) as (exporter, log):
        exporter.send_signal(signal.SIGQUIT)
        wait_until_logged(exporter, log, STILL_SERVING)
        assert exporter.poll() is None
        block = _block(log.read_text(), "exporter", exporter.pid)
    assert re.search(r'File ".*pynvml.*", line \d+ in nvmlDeviceGetSamples\n(  File .*\n)*'
                     r'  File ".*exporter/gpu_sampler\.py", line \d+ in ', block), block


def test_an_exporter_out_of_file_descriptors_still_writes_its_stacks(tmp_path: Path) -> None:
    """A process that looks hung may be one at its open-file limit: the stacks are gathered in an in-memory file,
    which needs a descriptor; without one they go to stderr directly, and nothing is raised into the serving."""
    port = free_port()
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", log) as exporter:
        limits = resource.prlimit(exporter.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(exporter.pid, resource.RLIMIT_NOFILE, (3, limits[1]))  # every descriptor taken
        try:
            exporter.send_signal(signal.SIGQUIT)
            wait_until_logged(exporter, log, STILL_SERVING)
        finally:
            resource.prlimit(exporter.pid, resource.RLIMIT_NOFILE, limits)
        assert http_get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        block = _block(log.read_text(), "exporter", exporter.pid)
    assert re.search(r'File ".*exporter/startup\.py", line \d+ in serve', block), block
    assert "Stack for <Task pending name='ModelMeshCollector.run'" in block, block
    assert "Traceback" not in log.read_text()


def test_serve_in_one_process_writes_its_stacks_and_keeps_serving(tmp_path: Path) -> None:
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"], ["--workers", "0"]) as adapter:
        wait_until_logged(adapter.process, adapter.log, REFRESHING)
        adapter.process.send_signal(signal.SIGQUIT)
        wait_until_logged(adapter.process, adapter.log, STILL_SERVING)
        assert http_get(f"{adapter.url}/healthz")[0] == 200
        assert adapter.process.poll() is None
        text = adapter.log_text()
        block = _block(text, "adapter (one process, --workers 0)", adapter.process.pid)
    # One pair of parentheses: was "the adapter (one process, --workers 0) (pid N)".
    assert ") (pid" not in text, text
    # The dump starts with the dumper's own frames (faulthandler starts at the frame it is called from), as
    # docs/operations.md says; what the process was doing follows them.
    assert re.search(r'Current thread 0x[0-9a-f]+ \(most recent call first\):\n'
                     r'  File ".*exporter/stack_dumps\.py", line \d+ in _threads_text\n', block), block
    assert re.search(r'File ".*autoscaler/server\.py", line \d+ in serve_in_process', block), block
    assert "Stack for <Task pending name='refresh'" in block, block


def test_serve_passes_sigquit_to_its_workers_and_every_process_writes_its_stacks(tmp_path: Path) -> None:
    """As in a pod: the signal to the refresh process (PID 1 there) only; each worker's block follows."""
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"], ["--workers", "2"]) as adapter:
        wait_until_logged(adapter.process, adapter.log, REFRESHING)
        workers = sorted(serving_workers(adapter.process.pid))
        assert len(workers) == 2, workers
        adapter.process.send_signal(signal.SIGQUIT)
        roles = [f"end of the stacks of the serving worker {index}" for index in range(2)]
        wait_until_logged(adapter.process, adapter.log, STILL_SERVING, *roles)
        assert http_get(f"{adapter.url}/healthz")[0] == 200
        assert adapter.process.poll() is None
        assert sorted(serving_workers(adapter.process.pid)) == workers
        text = adapter.log_text()
    refresh = _block(text, "refresh process", adapter.process.pid)
    assert re.search(r'File ".*autoscaler/workers\.py", line \d+ in serve_with_workers', refresh), refresh
    assert "Stack for <Task pending name='refresh'" in refresh, refresh
    pids = {int(pid) for pid in re.findall(r"the Python stacks of the serving worker \d, pid (\d+):", text)}
    assert pids == set(workers), text
    for index in range(2):
        worker_pid = int(re.findall(rf"the Python stacks of the serving worker {index}, pid (\d+):", text)[0])
        block = _block(text, f"serving worker {index}", worker_pid)
        assert re.search(r'File ".*autoscaler/serving_worker\.py", line \d+ in worker_main', block), block
        assert "Stack for <Task pending name='receive-snapshots'" in block, block


def _children(pid: int) -> dict[int, str]:
    """The child processes of `pid`, as ps shows them: pid to state and command line."""
    listed = subprocess.run(["ps", "-ww", "-o", "pid=,stat=,args=", "--ppid", str(pid)], capture_output=True, text=True,
                            check=False).stdout
    return {int(pid): rest for pid, _, rest in (line.strip().partition(" ") for line in listed.splitlines())}


def test_sigquit_to_every_process_of_serve_as_ctrl_backslash_sends_it_kills_none(tmp_path: Path) -> None:
    """A terminal's Ctrl-\\ reaches the whole process group: multiprocessing's resource tracker, at Python's
    default, was killed (a zombie left) while the others wrote their stacks."""
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"], ["--workers", "2"]) as adapter:
        wait_until_logged(adapter.process, adapter.log, REFRESHING)
        before = _children(adapter.process.pid)
        assert any("resource_tracker" in command for command in before.values()), before
        for pid in [adapter.process.pid, *before]:
            os.kill(pid, signal.SIGQUIT)
        roles = [f"end of the stacks of the serving worker {index}" for index in range(2)]
        wait_until_logged(adapter.process, adapter.log, STILL_SERVING, *roles)
        assert http_get(f"{adapter.url}/healthz")[0] == 200
        after = _children(adapter.process.pid)
    assert sorted(after) == sorted(before), (before, after)
    assert not [command for command in after.values() if command.startswith("Z")], after
