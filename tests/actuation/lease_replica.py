"""Replicas of the adapter electing a leader: an elector's real `run()` against the fake API on a clock the test
steps, each Lease call it makes recorded with that clock's time. The leader-election tests count those calls at
each moment of the clock, never how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import JSON, KubeClient
from autoscaler.kube.errors import KubeApiError
from tests.support.clock import SteppedClock

LEASE_S, RENEW_S, RETRY_S = 15.0, 10.0, 2.0  # the defaults
T = TypeVar("T")


@dataclass
class LeaseCalls:
    """The Lease calls one replica makes, stamped with its own clock, passed through to the real client."""

    client: KubeClient
    clock: SteppedClock
    calls: list[tuple[float, str, int | None]] = field(default_factory=list)  # (clock, call, status: None = ok)

    async def _call(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        at = self.clock.now
        try:
            result = await call()
        except KubeApiError as error:
            self.calls.append((at, name, error.status))
            raise
        self.calls.append((at, name, None))
        return result

    async def get_lease(self, namespace: str, name: str) -> JSON | None:
        return await self._call("get", lambda: self.client.get_lease(namespace, name))

    async def create_lease(self, namespace: str, lease: JSON) -> JSON:
        return await self._call("create", lambda: self.client.create_lease(namespace, lease))

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON:
        return await self._call("replace", lambda: self.client.replace_lease(namespace, name, lease))

    def at(self, start: float, end: float) -> list[tuple[float, str, int | None]]:
        """The calls made at `start <= clock < end`."""
        return [call for call in self.calls if start <= call[0] < end]


class Replica:
    """An elector's real `run()` on a stepped clock: each sleep moves the clock on, lets the rest of the world
    (`on_sleep`, given the clock: another replica's Lease writes) act at that moment, and yields once."""

    def __init__(self, client: KubeClient, identity: str, clock: SteppedClock,
                 on_sleep: Callable[[float], None] = lambda now: None) -> None:
        self.clock = clock
        self._on_sleep = on_sleep
        self.store = LeaseCalls(client, clock)
        config = LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity=identity,
                             lease_duration_s=LEASE_S, renew_deadline_s=RENEW_S, retry_period_s=RETRY_S)
        self.elector = LeaseElector(self.store, config, clock=clock, wall_clock=lambda: 1.7e9 + clock.now,
                                    sleep=self._sleep, rand=lambda: 0.0)
        self.changes: list[tuple[bool, float]] = []
        self.elector.add_listener(lambda leading: self.changes.append((leading, clock.now)))
        self.task: asyncio.Task[None] | None = None

    async def _sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self._on_sleep(self.clock.now)
        await asyncio.sleep(0.001)  # the API server's turn

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await self.task


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(30):
            while not condition():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None
