"""Real processes for end-to-end tests: started with this interpreter, awaited until they answer, and
always stopped, so no test leaves a stray server behind."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from tests.support.fork_server import fork_server, forkable
from tests.support.port_owner import someone_else_listens
from tests.support.ports import free_port as free_port  # re-exported: servers started here need one

T = TypeVar("T")


_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def http_get(url: str, timeout: float = 30.0, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """GET a URL (https without verification: test servers are self-signed), with `headers` (a bearer token);
    (status, body).

    The timeout is generous (it costs nothing where the server answers): on the 2-core CI machine with three test
    files and a dozen server processes at once, a server can take seconds to answer."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_INSECURE) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:  # its socket closed now, not whenever it is collected (a ResourceWarning, an error here)
            return error.code, error.read().decode()


def http_post_json(url: str, body: str, timeout: float = 30.0) -> int:
    request = urllib.request.Request(url, data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout, context=_INSECURE) as response:
        status: int = response.status
        return status


class PortTakenError(RuntimeError):
    """What answered a started server's readiness URL is another process: its port was taken before it bound."""


def _started_name(process: subprocess.Popen[bytes]) -> str:
    args = [str(arg) for arg in process.args] if isinstance(process.args, Sequence) else [str(process.args)]
    return args[2] if len(args) > 2 and args[1] == "-m" else Path(args[0]).name


def wait_until_answers(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Wait until `process` answers at `url`; an answer from anyone else on that port fails at once.

    An answer alone proves only that something listens there: in CI another test run's ModelMesh stand-in, which
    answers every path, held an exporter's port, and the test read the stand-in's metrics as the exporter's. So
    the answer counts once the listening socket is the started process's own (a look at /proc, no wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}:\n{log.read_text()}")
        try:
            http_get(url, timeout=1.0)
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
            continue
        holder = someone_else_listens(url, process.pid)
        if holder is None:
            return
        port = urlsplit(url).port
        raise PortTakenError(
            f"port {port} is held by another process ({holder}), not the {_started_name(process)} we started "
            f"(pid {process.pid}): a port-block collision: another test run on this machine took a port from the "
            f"same block (tests/support/ports.py); give each checkout its own TEST_PORT_BLOCK_OFFSET.\n"
            f"{log.read_text()}")
    raise TimeoutError(f"{url} did not answer within {timeout} s:\n{log.read_text()}")


def wait_until_logged(process: subprocess.Popen[Any], log: Path, *texts: str, timeout: float = 120.0) -> None:
    """Wait until every one of `texts` is in `log` (a process that reaches a point says so there); the log in the
    error where the process exits or the time runs out first (generous: a loaded machine starts slowly)."""
    deadline = time.monotonic() + timeout
    while not all(text in log.read_text() for text in texts):
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{texts} not logged within {timeout} s:\n{log.read_text()}")
        time.sleep(0.2)


TEST_PROCESS_ENV: dict[str, str] = {"AUTOSCALER_REFRESH_NICE": "0"}
"""What every process started here gets unless the test's own `env` (or a flag) says otherwise.

The adapter's refresh process lowers its priority by 10 (`--refresh-nice`) so that, in a pod, its own serving
workers run first. On the 2-core CI machine it competes instead with three test workers and a dozen other test
servers, all at priority 0, and at a tenth of their share it starved: an end-to-end test's adapter took 26 s after
it started serving to discover its one runtime, and the test's 30 s wait for a served value ran out
(`test_scale_seams`, only under load). `test_workers` starts its adapter with the flag and checks the niceness."""


def start(module_args: list[str], log: Path, env: dict[str, str] | None = None,
          fork: bool = True) -> subprocess.Popen[bytes]:
    """Start `python -m <module_args>` with its output going to `log`: forked from this test process's warm
    interpreter (`tests.support.fork_server`, half a second of CPU less) unless `fork` is False (a test that
    measures the process's memory) or its environment must be settled at an interpreter's start."""
    environment = {**os.environ, **TEST_PROCESS_ENV, **(env or {})}
    if fork and forkable(environment) and (server := fork_server()) is not None:
        return server.spawn(module_args, log, environment)
    with open(log, "ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", *module_args], stdout=output, stderr=subprocess.STDOUT, env=environment,
        )


@contextmanager
def running(module_args: list[str], ready_url: str, log: Path,
            env: dict[str, str] | None = None, fork: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """Run `python -m <module_args>` until the block ends; its output goes to `log` (`fork`: as for `start`)."""
    process = start(module_args, log, env, fork)
    try:
        wait_until_answers(ready_url, process, log)
        yield process
    finally:
        stop(process)


@dataclass(frozen=True)
class Server:
    """A process for `all_running`: `python -m <module_args>`, ready once `ready_url` answers."""

    module_args: list[str]
    ready_url: str
    log: Path
    env: dict[str, str] | None = None


@contextmanager
def all_running(servers: Sequence[Server]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run several servers that do not need each other until the block ends: all started at once, the block
    entered once every one answers, all stopped together at its end.

    Why together: each is an interpreter importing its modules, most of a second of start-up and a moment of
    shutdown; one after the other, a data path of six pods spent over ten seconds starting its thirteen
    processes. Started together, those waits overlap; what the block sees is the same (every server answers)."""
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for server in servers:
            processes.append(start(server.module_args, server.log, server.env))
        for server, process in zip(servers, processes, strict=True):
            wait_until_answers(server.ready_url, process, server.log)
        yield processes
    finally:
        stop(*processes)


def stop(*processes: subprocess.Popen[bytes]) -> None:
    """SIGTERM to each process still running, then wait for them (together: their shutdowns overlap); one
    that has not exited 10 s after its signal is killed."""
    running_now = [process for process in processes if process.poll() is None]
    for process in running_now:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for process in running_now:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def poll(check: Callable[[], T | None], timeout: float, interval: float = 0.25) -> T:
    """Call `check()` until it returns something truthy; return that, or raise with the last value."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s; last value {last!r}")


def serving_workers(adapter: int) -> list[int]:
    """The serving workers of the adapter process `adapter`: its children but multiprocessing's resource
    tracker (read from /proc, so a zombie not yet reaped still counts)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == adapter and b"resource_tracker" not in command:
                found.append(int(entry.name))
    return found
