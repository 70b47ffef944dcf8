"""Test servers forked from one warm interpreter instead of each importing its libraries again.

Most of what an end-to-end test's adapter, exporter or ModelMesh stand-in costs in CPU is its start-up: an
interpreter importing aiohttp (whose connector builds two TLS contexts from the system's CA bundle),
cryptography, prometheus_client and asyncio, some 0.5 s of a CPU each time. An end-to-end file starts hundreds;
on the 2-core CI machine (7 December 2026: the end-to-end tests started 426 such processes, 430 CPU-s of their
620) that start-up was the largest single part of the suite's CPU. So each xdist worker keeps one **fork server**:
a single-threaded interpreter that has imported those third-party libraries (none of the project's own modules,
whose import-time state must be each process's own) and forks a child per `python -m MODULE ARGS` asked of it.
The child is a real, separate process: its own pid, environment, working directory, log and signals; it runs
the module as `python -m` would (`runpy`, `__main__`, `sys.argv`), and exits as the interpreter does. What
differs: its parent is the fork server (the test waits through it: `ForkedProcess`), its `/proc/PID/cmdline` is
the fork server's, and it starts with the server's imports resident.

A process whose environment asks for what an interpreter settles at its start (`PYTHON*`, `LD_PRELOAD` as
`faketime` uses, locale, time zone, CA bundle, prometheus_client's multiprocess directory) is started the
ordinary way, as is everything where `TEST_FORK_SERVER=0`; a test measuring a process's memory asks for a
fresh interpreter (`processes.start(..., fork=False)`).
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SETTLED_AT_START = ("PYTHON", "LD_", "FAKETIME", "MALLOC", "GLIBC", "LC_", "LANG", "TZ", "SSL_", "OPENSSL",
                    "PROMETHEUS_MULTIPROC", "prometheus_multiproc")
"""Environment variables (by prefix) that an interpreter, libc or a preloaded library reads once at its start: a
process asking for other values than the fork server's own is started fresh."""

PRELOADED = ("asyncio", "ssl", "json", "argparse", "logging", "concurrent.futures", "aiohttp", "aiohttp.web",
             "prometheus_client", "yaml", "cryptography.x509", "cryptography.hazmat.primitives.asymmetric.ec")
"""What the fork server imports before forking: third-party and standard libraries only."""


def forkable(env: Mapping[str, str]) -> bool:
    """Whether a process with environment `env` may be forked from a server started with this one's."""
    if os.environ.get("TEST_FORK_SERVER", "1") == "0" or env.get("TEST_FORK_SERVER") == "0":
        return False
    keys = set(env) | set(os.environ)
    return all(env.get(key) == os.environ.get(key) for key in keys if key.startswith(SETTLED_AT_START))


class ForkedProcess(subprocess.Popen[bytes]):
    """A `subprocess.Popen` for a child of the fork server: `poll`, `wait`, `send_signal`, `terminate`, `kill`,
    `pid`, `args` and `returncode` as for a child of this process; its exit status comes from the server, its
    parent, which reaps it."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:  # no Popen.__init__: nothing runs
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None
        self._server = server
        self._child_created = False  # Popen.__del__: not this process's child, nothing to reap
        self._waitpid_lock = threading.Lock()
        self._sigint_wait_secs = 0.25
        self._communication_started = False
        self._closed_child_pipe_fds = True
        self.text_mode = False
        self.universal_newlines = False
        self.encoding = self.errors = None

    def _internal_poll(self, *args: Any, **kwargs: Any) -> int | None:
        if self.returncode is None:
            status = self._server.status(self.pid, timeout=0.0)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self.returncode is None:
            status = self._server.status(self.pid, timeout=timeout)
            if status is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class ForkServer:
    """This process's side: asks the server for children and keeps their exit statuses."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(  # held for the life of this process; it ends when `ours` closes
            [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self._file = ours.makefile("rwb", buffering=0)
        self._lock = threading.Lock()  # one request at a time
        self._changed = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self.commands: dict[int, list[str]] = {}
        """The command line each child was asked with (its /proc cmdline is the server's)."""
        self.alive = True
        threading.Thread(target=self._read, name="fork-server-reader", daemon=True).start()

    def _read(self) -> None:
        for line in self._file:
            message = json.loads(line)
            with self._changed:
                if "exited" in message:
                    self._exits[message["exited"]] = message["status"]
                else:
                    self._replies.append(message)
                self._changed.notify_all()
        with self._changed:
            self.alive = False
            self._changed.notify_all()

    def spawn(self, module_args: list[str], log: Path, env: Mapping[str, str]) -> ForkedProcess:
        """`python -m <module_args>`, its output appended to `log`, forked from the server."""
        log.touch()  # there when this returns, as where Popen opens it: a test may read it at once
        request = {"module": module_args[0], "args": module_args[1:], "log": str(log), "env": dict(env),
                   "cwd": os.getcwd()}
        with self._lock:
            self._file.write(json.dumps(request).encode() + b"\n")
            with self._changed:
                self._changed.wait_for(lambda: self._replies or not self.alive, timeout=60)
                if not self._replies:
                    raise RuntimeError("the fork server did not answer (tests/support/fork_server.py)")
                reply = self._replies.pop(0)
        command = [sys.executable, "-m", *module_args]
        self.commands[int(reply["pid"])] = command
        return ForkedProcess(self, int(reply["pid"]), command)

    def status(self, pid: int, timeout: float | None) -> int | None:
        """`pid`'s wait status once it has exited, else None after `timeout` seconds (None: as long as it takes)."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or not self.alive, timeout=timeout)
            if pid in self._exits:
                return self._exits[pid]
        if not self.alive and not Path(f"/proc/{pid}").exists():
            return 0x9  # the server is gone (its children were killed with it): as killed by SIGKILL
        return None


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer | None:
    """This process's fork server (started at the first use), or None where it has stopped."""
    global _server
    with _server_lock:
        if _server is None:
            _server = ForkServer()
        return _server if _server.alive else None


def command_line(pid: int) -> list[bytes]:
    """Process `pid`'s command line as /proc gives it, split; for a child of this process's fork server, the
    `python -m MODULE ARGS` it was started as."""
    if _server is not None and pid in _server.commands:
        return [arg.encode() for arg in _server.commands[pid]]
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")


# The server's side, in its own process.

def _child(request: dict[str, Any], server_files: list[Any]) -> None:
    """In the forked child: become `python -m MODULE ARGS` with the request's log, environment and directory
    (`server_files`: the server's own, closed here)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for file in server_files:
        if isinstance(file, int):
            os.close(file)
        else:
            file.close()
    os.chdir(request["cwd"])
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    sys.exit(0)  # ends here, through the interpreter's own exit (atexit, threads), as `python -m` does


def _serve(fd: int) -> None:
    for name in PRELOADED:
        __import__(name)
    channel = socket.socket(fileno=fd)
    reader = channel.makefile("rb", buffering=0)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    events = selectors.DefaultSelector()
    events.register(channel, selectors.EVENT_READ)
    events.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in events.select():
            if key.fileobj == wake_read:
                os.read(wake_read, 4096)
                continue
            line = reader.readline()
            if not line:  # the test process is gone: so go its servers
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return
            request = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, [events, reader, channel, wake_read, wake_write])
            children.add(pid)
            channel.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            channel.sendall(json.dumps({"exited": pid, "status": status}).encode() + b"\n")


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
