"""Pod discovery's log with `--namespaces` naming many tenants, as the platform engineer reads it: the pod watches
of all of them starting, or all broken at once by the API server restarting (a control-plane upgrade), are a
line or two, not two lines per namespace.

With 30 namespaces, every start said `pod watch of namespace X established` 30 times, and one API server restart
60 lines (each watch broken, then established again)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.kube.watch_news import QUIET_S
from autoscaler.log_lists import NAMED
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

TENANTS = [f"tenant{number}" for number in range(30)]
LONGEST_LINE = 2_000


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as kube:
        for namespace in TENANTS:
            kube.add_modelmesh_runtime(namespace, "modelmesh-serving-triton", replicas=2)
        yield kube


def watch_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "autoscaler.sources.kube_pods" and "pod watch" in r.getMessage()]


@pytest.mark.parametrize("late_s", [0.0, 3 * QUIET_S], ids=["together", "a-third-seconds-late"])
async def test_thirty_tenants_watches_established_at_start_are_one_line(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture, late_s: float,
) -> None:
    """`late_s`: how much later than the rest a third of the namespaces' first lists answer (a loaded adapter or
    API server): still one line, not one per group that happened to come a quiet second apart."""
    if late_s:
        kube.delay("/namespaces/tenant2[0-9]/pods", late_s)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    subject = KubePodDiscovery(kube.client_configuration(), runtimes=[], discover=True, namespaces=TENANTS,
                               resync_interval_s=3600, request_timeout_s=5.0)
    await subject.start()
    try:
        await eventually(lambda: subject.healthy)  # every watch established
        await eventually(lambda: watch_lines(caplog) != [])  # said a quiet second after the last
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Kubernetes discovery: pod watches of {len(TENANTS)} namespaces established: ")
    assert lines[0].endswith(f" and {len(TENANTS) - NAMED} more")


async def test_an_api_server_restart_breaking_thirty_watches_is_two_lines(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    subject = KubePodDiscovery(kube.client_configuration(), runtimes=[], discover=True, namespaces=TENANTS,
                               resync_interval_s=3600, request_timeout_s=5.0)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    await subject.start()
    try:
        await eventually(lambda: subject.healthy)
        await eventually(lambda: watch_lines(caplog) != [])  # the start's line, said
        caplog.clear()
        kube.end_watches(abort=True)
        await eventually(lambda: any("broken" in line for line in watch_lines(caplog)))
        await eventually(lambda: subject.healthy)  # every watch back
        await eventually(lambda: any("established" in line for line in watch_lines(caplog)))
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert len(lines) == 2, lines
    broken, established = lines
    # every stream dropped and resumed where it left off: served meanwhile, not "unknown (503) until they recover"
    assert broken.startswith(f"Kubernetes discovery: pod watches of {len(TENANTS)} namespaces broken, resuming them "
                             "where they left off: their runtimes stay served if they are back within 5 s, else are "
                             "unknown (503) until they recover, the HPA holding their replicas (no scale-up, no "
                             "scale-down): "), broken
    assert established.startswith(f"Kubernetes discovery: pod watches of {len(TENANTS)} namespaces established: ")
    assert max(map(len, lines)) < LONGEST_LINE
