"""After an outage of the Kubernetes API, the HPA watch has the bounds current again within a few seconds of the
API's return, as pod discovery does (tests/sources/test_kube_outage_recovery.py).

Before, it backed off 0.5 s doubling to 30 s whatever the failure: after a 40 s outage an HPA's maxReplicas raised
meanwhile was read 21.5 s after the API was back, every recommendation clamped to the old cap until then. A
failure the API server never answered (connection refused, a timeout) costs it nothing to retry: those back off
0.5, 1, 2, then 4 s (`autoscaler.kube.backoff.UNANSWERED_MAX_S`), an answered one (a 5xx, a 403) as before, counting
the answered failures in a row alone.

The waits are played on a clock of the test's own (`tests.support.outage_clock`): no wall-clock window.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import JSON, FakeKubeApi
from tests.support.outage_clock import Waits, back_after_outage
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
PROMPT_S = 4.0
"""How soon after the API's return the bounds are current again: the longest wait after a failure with no answer
(the HPA watch's backoff has no jitter)."""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        server.add_hpa(NS, "triton", min_replicas=2, max_replicas=5, target=("Deployment", TRITON.deployment))
        yield server


def max_replicas(count: int) -> Callable[[JSON], None]:
    def set_max(hpa: JSON) -> None:
        hpa["spec"]["maxReplicas"] = count
    return set_max


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
@pytest.mark.parametrize("outage_s", [40.0, 100.0])
async def test_an_hpa_s_bounds_changed_during_an_outage_are_read_within_seconds_of_the_api_s_return(
    kube: FakeKubeApi, outage_s: float, answers_first: int | None,
) -> None:
    """The server's first answer at its return may be a 503 (an apiserver still starting, no Retry-After): that is
    the first answered failure in a row, retried after 0.5 s, not at the step the refused tries had doubled to (the
    30 s cap, every recommendation clamped to the old maxReplicas meanwhile)."""
    waits = Waits()
    settings = Configuration()
    settings.host = kube.url
    watch = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, sleep=waits.sleep)  # the shipped backoff
    await watch.start()
    try:
        await eventually(lambda: watch.bounds(TRITON) == (2, 5) and kube.watch_count("horizontalpodautoscalers") == 1)
        await kube.pause()  # the outage: the watch sees its connection die, every new one is refused
        kube.update_object("horizontalpodautoscalers", NS, "triton", max_replicas(8))
        if answers_first is not None:  # the watch's first request once the server answers again
            kube.fail(r"/horizontalpodautoscalers$", answers_first)
        back_after, woken_while_down = await back_after_outage(
            kube, waits, outage_s, loops=1, resource="horizontalpodautoscalers",
            current=lambda: watch.bounds(TRITON) == (2, 8))
    finally:
        await watch.close()
    late_s = PROMPT_S + (0.0 if answers_first is None else 0.5)  # the first answered failure's wait
    assert back_after <= late_s, f"the bounds current only {back_after:.1f} s after the API came back"
    # Backing off while down: no more than one attempt every 4 s after the first few (0.5, 1, 2 s).
    assert woken_while_down <= outage_s / 4 + 4, woken_while_down
