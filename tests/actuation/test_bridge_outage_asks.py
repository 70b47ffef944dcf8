"""An HPA that keeps writing while the API server fails the bridge's requests to the ServingRuntime: a 500 on
every read (or write) of it for a few seconds, then cleared. Each write the watch handed over went to the failing
server at once and counted as one more failure in a row, so the backoff climbed to its cap in seconds (a write
every 0.5 s through an 8 s outage: 10 reads, the last ask carried 29 s after the server came back). A new ask
during a backoff now waits for that RuntimeScale's retry, whose pass reads it anew (docs/design.md, "When": a
failing API server costs one pass per backoff step)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator

import pytest

from autoscaler.actuation import bridge_retries
from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.kube.backoff import retry_delay
from autoscaler.kube.client import KubeClient
from tests.actuation.test_bridge_during_pass import NS, fleet, hpa_writes, rt, running
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

OUTAGE_S = 2.0
BACKOFF = BridgeSettings(resync_interval_s=3600.0, backoff_base_s=0.2, backoff_cap_s=30.0)
"""The shipped 1 s doubling to 60 s, five times faster: the backoff steps through the outage are 0.2, 0.4, 0.8 and
1.6 s (jitter drawn at its top), the last ending 1.6 s at most after the server comes back."""


@contextlib.asynccontextmanager
async def bridging_one_runtime(kube: FakeKubeApi, kube_client: KubeClient) -> AsyncIterator[None]:
    """A bridge (backoff `BACKOFF`, jitter at its top) and its RuntimeScale watch, carrying one runtime whose
    ServingRuntime has taken the RuntimeScale's 3 replicas; both stopped on leaving."""
    fleet(kube, 1)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BACKOFF, rand=lambda: 1.0)
    async with running(kube, kube_client, bridge, 1):
        yield


@pytest.mark.parametrize("method", ["GET", "PATCH"])
@pytest.mark.parametrize("asks_every_s", [OUTAGE_S * 2, 0.1], ids=["one-ask", "an-ask-every-0.1s"])
async def test_the_last_ask_of_an_outage_goes_out_within_a_backoff_step_of_recovery(
    kube: FakeKubeApi, kube_client: KubeClient, method: str, asks_every_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However often the HPA writes during the outage, the ServingRuntime is tried about once per backoff step
    (not once per ask) and holds the HPA's last ask within one step (1.6 s) of the server's recovery: with an
    ask every 0.1 s the backoff had climbed to its 30 s cap."""
    failures: list[int] = []  # the failures in a row of each retry scheduled

    def recorded(failed: int, initial_s: float, cap_s: float, draw: float, retry_after_s: float | None) -> float:
        failures.append(failed)
        return retry_delay(failed, initial_s, cap_s, draw, retry_after_s)

    monkeypatch.setattr(bridge_retries, "retry_delay", recorded)
    async with bridging_one_runtime(kube, kube_client):
        before = len(kube.requests)
        kube.fail(r"/servingruntimes", 500, times=None, method=method)
        asks, started = 3, time.monotonic()
        while time.monotonic() - started < OUTAGE_S:
            asks += 1
            hpa_writes(kube, rt(0), asks)
            await asyncio.sleep(min(asks_every_s, max(0.0, OUTAGE_S - (time.monotonic() - started))))
        kube.clear_faults()
        tried = [r for r in kube.requests[before:] if r.resource == "servingruntimes" and r.method == method]
        recovered = time.monotonic()
        outage_s = recovered - started
        await eventually(lambda: kube.serving_runtime_replicas(NS, rt(0)) == asks, timeout=10.0)
        carried_after_s = time.monotonic() - recovered
    # One try (a pass lists the runtimes, then reads or writes the one: two) per backoff step: 5 steps.
    assert len(tried) <= 10, f"{len(tried)} tries of the ServingRuntime during a {OUTAGE_S} s outage"
    # One failure a backoff step: in the 2 s outage the tries at 0, 0.2, 0.6 and 1.4 s, the retry that carried the
    # last ask at most 1.6 s after recovery (it was over 10 s: each ask one more failure, the backoff at its 30 s
    # cap). Asked of the backoff, not of the clock: a loaded machine stretches each wait (and tries less often), and
    # the outage with them, so the steps are counted within the outage it made (with half a second for the passes).
    steps = 1 + int(math.log2((outage_s + 0.5) / BACKOFF.backoff_base_s + 1))
    assert failures and max(failures) <= steps, (
        f"failures in a row {failures} in a {outage_s:.1f} s outage; the last ask carried {carried_after_s:.1f} s "
        "after recovery")


async def test_an_ask_after_a_refused_one_goes_out_at_once(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    """A refusal is no outage: an admission webhook that refuses the HPA's ask of 4 (a 422, tried again only at the
    next resync) says nothing of its next ask, 5, which goes out at once. Held for the refused ask's retry like a
    failure's, it waited for the resync (15 s shipped; an hour here)."""
    async with bridging_one_runtime(kube, kube_client):
        refusal = kube.fail(r"/servingruntimes", 422, times=1, method="PATCH",
                            message="admission webhook denied the request: no 4 replicas on Sundays")
        hpa_writes(kube, rt(0), 4)
        await eventually(lambda: refusal.hits == 1)
        hpa_writes(kube, rt(0), 5)
        await eventually(lambda: kube.serving_runtime_replicas(NS, rt(0)) == 5, timeout=3.0)
