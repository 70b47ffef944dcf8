"""A Ctrl-C while the adapter starts its serving workers must stop it. Each worker is started with SIGINT held
from it (so that one still importing does not trace back with KeyboardInterrupt), and the refresh process must
still see that Ctrl-C once the worker has started. It did only when the process had no other thread: the
kernel hands a signal the starting thread blocks to another thread, and with SIGINT ignored meanwhile that
thread dropped it. The adapter then logged "serving ... with 2 worker processes" and ran on as if never asked
to stop (about one Ctrl-C in eight, as the workers started, in tests/e2e/test_workers.py)."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from autoscaler.worker_pool import _interrupts_held_from_the_worker


def test_a_ctrl_c_while_a_worker_starts_reaches_the_refresh_process_with_another_thread_running() -> None:
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    idle = threading.Event()
    other = threading.Thread(target=idle.wait, name="another thread, SIGINT not blocked", daemon=True)
    other.start()
    previous = signal.signal(signal.SIGINT, note)
    try:
        with _interrupts_held_from_the_worker():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the whole process group as a worker starts
            idle.wait(0.2)  # starting it takes a while (a fork and an exec): the other thread is scheduled
        for _ in range(100):  # a signal handled on the other thread runs here, between bytecodes
            if received:
                break
            idle.wait(0.01)
    finally:
        signal.signal(signal.SIGINT, previous)
        idle.set()
        other.join()
    assert received == [signal.SIGINT]
