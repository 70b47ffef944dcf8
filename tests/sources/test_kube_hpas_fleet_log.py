"""The HPA watch's log with `--namespaces` naming many tenants, as the platform engineer reads it: an API server
restart (5xx during a control-plane upgrade) refuses every namespace's HPA watch at once, and that is one line,
then one when they work again, not two lines per namespace (60 with 30 namespaces)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.kube.watch_news import QUIET_S
from autoscaler.log_lists import NAMED
from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

TENANTS = [f"tenant{number}" for number in range(30)]
LONGEST_LINE = 2_000
LOGGER = "autoscaler.sources.kube_hpas"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        for namespace in TENANTS:
            server.add_hpa(namespace, "triton", max_replicas=5, target=("Deployment", "modelmesh-serving-triton"))
        yield server


def watch_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and "HPA watch" in r.getMessage()]


def refused_namespaces(kube: FakeKubeApi) -> set[str | None]:
    return {r.namespace for r in kube.requests if r.resource == "horizontalpodautoscalers" and r.status == 503}


async def started_watch(kube: FakeKubeApi) -> HpaWatch:
    """The thirty tenants' HPA watch against `kube`, started, retrying at once (a 50 ms backoff)."""
    settings = Configuration()
    settings.host = kube.url
    watch = HpaWatch(lambda: ApiClient(settings), TENANTS, watch_timeout_s=30, backoff=lambda n: 0.05)
    await watch.start()
    return watch


async def test_an_api_server_restart_refusing_thirty_hpa_watches_is_two_lines(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    watch = await started_watch(kube)
    try:
        await kube.wait_for_watches(len(TENANTS), "horizontalpodautoscalers")
        assert watch.bounds(RuntimeKey(TENANTS[-1], "modelmesh-serving-triton")) == (1, 5)
        caplog.set_level("INFO", logger=LOGGER)
        kube.fail("/horizontalpodautoscalers", 503, times=None)  # the API server restarting
        kube.end_watches()  # each resumes its watch, refused
        await eventually(lambda: refused_namespaces(kube) >= set(TENANTS))
        kube.clear_faults()  # back
        await eventually(lambda: watch.ok)
        await eventually(lambda: any("work" in line for line in watch_lines(caplog)))
    finally:
        await watch.close()  # says anything still held: nothing may hide behind the wait above
    lines = watch_lines(caplog)
    assert len(lines) == 2, lines
    failing, again = lines
    assert failing.startswith(f"HPA watches of {len(TENANTS)} namespaces failing, keeping the bounds last seen: "
                              "tenant")
    assert "503" in failing, "one watch's error, as the API server said it"
    assert again.startswith(f"HPA watches of {len(TENANTS)} namespaces work again; the bounds are current: tenant")
    assert again.endswith(f" and {len(TENANTS) - NAMED} more")
    assert max(map(len, lines)) < LONGEST_LINE


async def test_watches_coming_back_seconds_apart_after_a_restart_still_say_one_line(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    """A control-plane upgrade on a loaded adapter: a third of the namespaces' watches come back seconds after the
    others (their lists answered slowly). Recovery is still one line, not one per group that happened to arrive
    more than a quiet second apart."""
    watch = await started_watch(kube)
    try:
        await kube.wait_for_watches(len(TENANTS), "horizontalpodautoscalers")
        caplog.set_level("INFO", logger=LOGGER)
        kube.fail("/horizontalpodautoscalers", 503, times=None)
        kube.end_watches()
        await eventually(lambda: refused_namespaces(kube) >= set(TENANTS))
        await eventually(lambda: any("failing" in line for line in watch_lines(caplog)))
        kube.clear_faults()
        kube.delay("/namespaces/tenant2[0-9]/horizontalpodautoscalers", 3 * QUIET_S)  # come back after the rest
        await eventually(lambda: watch.ok)
        await eventually(lambda: any("work" in line for line in watch_lines(caplog)))
    finally:
        await watch.close()
    lines = watch_lines(caplog)
    assert len(lines) == 2, lines
    assert lines[1].startswith(f"HPA watches of {len(TENANTS)} namespaces work again; the bounds are current: ")
