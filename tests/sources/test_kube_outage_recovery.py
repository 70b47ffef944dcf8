"""After an outage of the Kubernetes API, pod discovery is current again within a few seconds of the API's return,
and it still backs off while the API is down.

Before, the pod watch and the Deployment resync backed off 0.5 s doubling to 30 s (±20%) whatever the failure: after a
40 s outage they tried again some 20 to 27 s after the API was back, and every runtime answered 503 all that while,
its exporters healthy. A failure where the API server never answered (connection refused, a timeout) costs it
nothing to retry, so those back off to a few seconds only; an answered failure (a 5xx, a 403, a 429's Retry-After)
backs off as before, counting the answered failures in a row alone: a 503 at the API's return is the first.

The waits are played on a clock of the test's own (`Waits`), in the order they fall due: no wall-clock window.
The API is the fake's, down (`pause`) once discovery is current, until the outage's end, as an API server restart is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.support.outage_clock import Waits, back_after_outage
from tests.support.waiting import eventually

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
LOOPS = 2
"""The loops that wait between attempts: the namespace's pod watch and the Deployment resync."""
PROMPT_S = 5.0
"""How soon after the API's return discovery is current again: the longest wait after a failure with no answer
(4 s, +20% of jitter)."""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        server.add_modelmesh_runtime(KEY.namespace, KEY.deployment, replicas=1, ready_pods=1)
        yield server


@contextlib.asynccontextmanager
async def current_discovery(kube: FakeKubeApi, waits: Waits) -> AsyncIterator[KubePodDiscovery]:
    """Pod discovery of `KEY` on the fake, its waits on `waits`' clock, once it is current."""
    settings = Configuration()
    settings.host = kube.url
    discovery = KubePodDiscovery(settings, runtimes=[KEY], discover=False, request_timeout_s=2.0,
                                 start_timeout_s=10.0, sleep=waits.sleep)  # the shipped backoff, 0.5 s to 30 s
    try:
        await discovery.start()
        await eventually(lambda: discovery.healthy)
        yield discovery
    finally:
        await discovery.close()


@pytest.mark.parametrize("outage_s", [40.0, 300.0])
async def test_discovery_is_current_again_within_seconds_of_the_api_s_return(kube: FakeKubeApi,
                                                                             outage_s: float) -> None:
    waits = Waits()
    async with current_discovery(kube, waits) as discovery:
        await kube.pause()  # the outage: the watch sees its connection die, every new one is refused
        await eventually(lambda: not discovery.healthy)
        back_after, woken_while_down = await back_after_outage(
            kube, waits, outage_s, loops=LOOPS, resource="pods", current=lambda: discovery.healthy)
    assert back_after <= PROMPT_S, f"current only {back_after:.1f} s after the API came back"
    # Backing off while down: no more than about one attempt a loop every 3.2 s (4 s less its jitter), after the
    # first few (0.5, 1, 2 s).
    assert woken_while_down <= LOOPS * (outage_s / 3.2 + 4), woken_while_down


async def test_a_503_at_the_api_s_return_is_retried_as_the_first_answered_failure(kube: FakeKubeApi) -> None:
    """The API server's first answer after a 40 s outage of refused connections is a 503 (an apiserver still
    starting: no Retry-After), the next a 200: discovery is current again within seconds of the 200, every runtime
    served again. Before, the 503 waited the step the refused tries had doubled to (their count carried on): the
    30 s cap, 30 s of 503s for every runtime with the API server answering. The refused tries say nothing of how
    loaded the server is; the 503 is the first answered failure in a row, retried after 0.5 s (+20%)."""
    waits = Waits()
    async with current_discovery(kube, waits) as discovery:
        await kube.pause()
        await eventually(lambda: not discovery.healthy)
        # Each loop's first request once the server answers again (the pod watch's, the Deployment read's): a 503.
        starting = [kube.fail(r"/pods$", 503), kube.fail(r"/deployments/", 503)]
        back_after, _ = await back_after_outage(
            kube, waits, 40.0, loops=LOOPS, resource="pods", current=lambda: discovery.healthy)
    assert [fault.hits for fault in starting] == [1, 1], "the server's first answers were not the 503s"
    assert back_after <= PROMPT_S + 0.6, f"current only {back_after:.1f} s after the API came back"
