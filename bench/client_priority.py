"""The benchmarks' clients at a raised scheduling priority, where the benchmark may set one.

On a small machine the clients (ab, the HPA-paced Python clients) share a core with the benchmark's fake
exporters and the adapter's refresh, none of which shares a core with the client in a cluster: the
aggregator and the HPA controller run on control-plane nodes, the exporters in the runtime pods, and the
refresh on its own core of the adapter's pod. At the same priority a latency the client records can include
the time it waited for that core, and a paced client sends late. So the clients run at niceness
`CLIENT_NICENESS` where allowed (root, or CAP_SYS_NICE), and at the benchmark's own priority otherwise; the
benchmarks say which in their header. Every server of a comparison gets the same clients.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Iterator

CLIENT_NICENESS = -10


@functools.cache
def may_prioritize() -> bool:
    """Whether a child of this process may lower its niceness to `CLIENT_NICENESS`."""
    probe = subprocess.run([sys.executable, "-c", f"import os; os.nice({CLIENT_NICENESS})"], capture_output=True)
    return probe.returncode == 0


def prioritized_command(command: list[str]) -> list[str]:
    """`command` run through `nice` at `CLIENT_NICENESS` where allowed, else as it is."""
    return ["nice", "-n", str(CLIENT_NICENESS), *command] if may_prioritize() else command


def prioritize_this_process() -> None:
    """Lower this process's niceness to `CLIENT_NICENESS` where allowed (a client process's initializer)."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, CLIENT_NICENESS)


@contextlib.contextmanager
def prioritized() -> Iterator[None]:
    """This process at `CLIENT_NICENESS` where allowed for the block (a client run in the benchmark's own
    process), then back at its own niceness: processes it starts meanwhile would inherit the raised one."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    prioritize_this_process()
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def client_priority_words() -> str:
    """For a benchmark's header."""
    return (f"clients at niceness {CLIENT_NICENESS}" if may_prioritize()
            else "clients at the benchmark's own priority (not allowed to raise it: not root)")
