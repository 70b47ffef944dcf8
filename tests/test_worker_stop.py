"""The serving workers stop within one deadline, however many there are: the kubelet SIGKILLs a pod that outlives
its terminationGracePeriodSeconds, and the budget for that (tests/manifests) counts the workers' stop once."""

from __future__ import annotations

import time

import pytest

from autoscaler.worker_pool import STOP_TIMEOUT_S, WorkerPool


class StuckWorker:
    """A worker that ignores SIGTERM (stuck in a system call, say); `join` spends the time it is given."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.alive, self.terminated = clock, True, False

    def is_alive(self) -> bool:
        return self.alive

    def terminate(self) -> None:
        self.terminated = True

    def kill(self) -> None:
        self.alive = False

    def join(self, timeout: float | None = None) -> None:
        if self.alive and timeout is not None:
            self.clock[0] += timeout


@pytest.mark.parametrize("count", [1, 3, 8])
def test_stuck_workers_are_killed_within_one_stop_deadline(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    pool = WorkerPool.__new__(WorkerPool)  # the stopping half only: no processes are started
    stuck = [StuckWorker(clock) for _ in range(count)]
    pool.processes, pool.pipes = stuck, []  # type: ignore[assignment]
    pool.stop()
    assert all(worker.terminated and not worker.alive for worker in stuck)
    assert clock[0] - 1000.0 <= STOP_TIMEOUT_S
