"""SIGQUIT: every thread's and every asyncio task's Python stack to stderr, and the process goes on serving.

An operator whose adapter or exporter looks hung sends `kill -QUIT`, as to a Go program, which writes every
goroutine's stack. At Python's default the signal killed the process with a core dump and nothing useful in the
log, and the pod restarted with the evidence gone. Here the process writes its stacks and keeps serving (where Go
exits 2): a dump should cost nothing; SIGTERM still stops it.

A Python handler (`signal.signal`) calling `faulthandler.dump_traceback`, rather than `faulthandler.register`'s
handler in C, because:
- each block is headed with the process's role and pid and followed by the asyncio tasks: `serve --workers N`
  writes several processes' blocks into one log;
- the block goes out in one write, so that the serving workers' blocks (they are dumped at the same moment) do
  not interleave line by line, as the C handler's many small writes would;
- it still runs while the event loop is stuck: at the main thread's next bytecode, in the middle of a task that
  never yields, or interrupting a blocking call (`epoll_wait`, a lock). A loop's own handler
  (`loop.add_signal_handler`) waits for the loop, which a hung loop never frees.
What it cannot reach is a main thread stuck inside C code that never returns to Python: NVML's calls, the likely
ones, run in a thread of their own (`exporter.gpu_sampler`), whose stack the dump shows.

Here, in the exporter, because both programs use it (the adapter builds on the exporter's lower parts).
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)


def no_children() -> list[int]:
    return []


class StackDumps:
    """SIGQUIT's handler for a process whose role (`serving worker 0`) heads its block; `children()` gives the
    pids the signal is passed on to (in a container only PID 1 gets it: `kubectl exec ... -- kill -QUIT 1`)."""

    def __init__(self, role: str, children: Callable[[], Iterable[int]] = no_children) -> None:
        self.role = role
        self.children = children

    def install(self) -> None:
        """Take SIGQUIT over (main thread only); installing another `StackDumps` later replaces this one."""
        signal.signal(signal.SIGQUIT, self._dump)

    def _dump(self, signum: int, frame: object) -> None:
        """Runs between two bytecodes of whatever the main thread was doing: an error raised from here would be
        raised there (in the event loop, in a request), so none is."""
        sys.stderr.flush()  # what was logged before the signal stays before the block
        try:
            write_stacks(self.role, os.getpid())
        except OSError as error:  # stderr closed or gone
            log.warning("SIGQUIT: the stacks of the %s could not be written to stderr: %s", self.role, error)
        passed_to = []
        for pid in self.children():
            try:
                os.kill(pid, signal.SIGQUIT)
            except ProcessLookupError:  # it ended meanwhile: the refresh process's watch says so
                continue
            passed_to.append(pid)
        passed = f"; passed on to pids {', '.join(map(str, passed_to))}, which write theirs" if passed_to else ""
        log.info("SIGQUIT: the stacks of the %s, pid %d, written to stderr; still serving (SIGTERM stops it)%s",
                 self.role, os.getpid(), passed)


def write_stacks(role: str, pid: int, fd: int = 2) -> None:
    """Write the block SIGQUIT writes to `fd`: a header naming the process, every thread (most recent call
    first, as faulthandler writes it; the current thread's first frames are this dumper's own, since
    faulthandler starts at the frame it is called from and takes no other), every asyncio task of the loop
    running in the main thread, an end line.

    In one write where it can. faulthandler writes only to a file descriptor: an anonymous file in memory here
    (the exporter may run on a read-only file system, with no writable TMPDIR). A process at its open-file limit,
    one that may well look hung, has no descriptor for it: there faulthandler writes to `fd` directly."""
    # The pid after a comma: a role may end in parentheses ("adapter (one process, --workers 0)").
    header = f"SIGQUIT: the Python stacks of the {role}, pid {pid}: every thread, then every asyncio task\n"
    end = f"end of the stacks of the {role}, pid {pid}; it goes on serving\n"
    try:
        threads = _threads_text()
    except OSError as error:
        _write_all(fd, f"{header}(written as gathered: no file descriptor left to gather them in: {error})\n"
                       .encode())
        faulthandler.dump_traceback(fd, all_threads=True)
        _write_all(fd, f"{_tasks_text()}{end}".encode(errors="replace"))
        return
    _write_all(fd, f"{header}{threads}{_tasks_text()}{end}".encode(errors="replace"))


def _threads_text() -> str:
    """faulthandler's dump of every thread, through an anonymous file in memory."""
    with open(os.memfd_create("sigquit-stacks", os.MFD_CLOEXEC), "w+b") as dumped:
        faulthandler.dump_traceback(dumped, all_threads=True)
        dumped.seek(0)
        return dumped.read().decode(errors="replace")


def _tasks_text() -> str:
    """Each asyncio task's stack (where it waits), which the threads' dump shows only as the loop's `select`."""
    try:
        loop = asyncio.get_running_loop()  # the main thread's, where the handler interrupted it
    except RuntimeError:
        return "no asyncio event loop runs in the main thread\n"
    try:
        tasks = sorted(asyncio.all_tasks(loop), key=lambda task: task.get_name())
    except RuntimeError as error:  # the handler interrupted a change to the tasks' set
        return f"the asyncio tasks could not be listed: {error}\n"
    written = io.StringIO()
    written.write(f"{len(tasks)} asyncio task{'' if len(tasks) == 1 else 's'}, most recent call last:\n")
    for task in tasks:
        task.print_stack(file=written)
    return written.getvalue()


def _write_all(fd: int, data: bytes) -> None:
    """`os.write` until all of `data` is out (a pipe takes what fits): one call for most blocks."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
