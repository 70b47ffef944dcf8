"""The demo's adapter port taken by another program between the demo choosing it and the adapter listening.

The demo chooses its adapter's port free, then starts the adapter, which binds it a second or two later; on a busy
machine a client's outgoing connection can take that port as its own meanwhile, and the demo stopped: "the adapter
stopped (exit status 2): cannot start: cannot listen on 127.0.0.1:34569: Address already in use" (a CI run's four
demo tests). Now the demo starts its adapter again on another free port, a few times at most, and says so."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import aiohttp
import pytest

from autoscaler.demo import fleet as fleet_module
from autoscaler.demo.fleet import DemoFleet


async def listening(port: int, seconds: float = 30.0) -> bool:
    """Whether the adapter answers /healthz on `port` within `seconds`."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    async with aiohttp.ClientSession() as session:
        for _ in range(int(seconds / 0.2)):
            try:
                async with session.get(f"https://127.0.0.1:{port}/healthz", ssl=context) as response:
                    if response.status == 200:
                        return True
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    return False


async def test_an_adapter_port_taken_before_the_adapter_listens_moves_the_adapter_to_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real = fleet_module.free_port
    chosen: list[int] = []

    def free_port() -> int:
        """The port the adapter is about to get, once: the one another program took (the pods' ports are free)."""
        if fleet.pods and not chosen:
            chosen.append(taken.getsockname()[1])
            return chosen[0]
        return real()

    monkeypatch.setattr(fleet_module, "free_port", free_port)
    fleet = DemoFleet(tmp_path, {})
    try:
        async with fleet.running(1):
            first = fleet.adapter_port
            assert first == taken.getsockname()[1]
            for _ in range(150):
                assert fleet.adapter_failure() is None
                if fleet.adapter_port != first:
                    break
                await asyncio.sleep(0.2)
            assert fleet.adapter_port != first, "the adapter was not moved off the taken port"
            assert await listening(fleet.adapter_port)
            assert fleet.adapter_failure() is None
    finally:
        taken.close()
