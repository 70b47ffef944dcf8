"""The log of pod discovery and of the HPA watch while something between the adapter and the API server breaks
every watch as soon as it opens (a proxy or load balancer that refuses long-lived streams), as the platform engineer
reads it.

Every retry's watch opened (`established`, `works again` at INFO) and broke (`broken, keeping last inventory`,
`failing, keeping the bounds last seen`, WARNINGs): two lines a retry for as long as it lasted, each saying the
watch worked when it did not. One warning a failing spell; the all-clear when the watch works again: a list handed
over, a watch run to its end or open a while (`autoscaler.kube.failing_spell`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import discovery
from tests.support.waiting import eventually
from tests.support.watch_bars import NEVER_S, watches_judged

DROPS = 5
NS = "modelmesh-serving"
HPA_LINES = ("autoscaler.sources.kube_hpas", "HPA watch")
REOPENED_WITHIN_S = 30.0
"""A hang detector: the watches here are reopened 0.02 to 0.1 s after a break, or a second after a very short one."""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


def watch_lines(caplog: pytest.LogCaptureFixture, logger: str = "autoscaler.sources.kube_pods",
                watch: str = "pod watch") -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == logger and watch in r.getMessage()]


async def dropped_as_soon_as_open(kube: FakeKubeApi, resource: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`DROPS` watches of `resource` broken as soon as they open, then one that works: it runs to its end.

    Broken before they worked, however long a loaded machine stretches the moment: the adapter judged a watch cut
    0.05 s after it opened (by the test's clock) open a second, and so working, when a stall came between."""
    with watches_judged(monkeypatch, works_after_s=NEVER_S, stays_open_after_s=NEVER_S):
        for _ in range(DROPS):
            await kube.wait_for_watches(1, resource, timeout=REOPENED_WITHIN_S)
            await asyncio.sleep(0.05)  # opened: its answer reached the adapter
            kube.end_watches(abort=True)
        await kube.wait_for_watches(1, resource, timeout=REOPENED_WITHIN_S)  # the last one's break judged
    await asyncio.sleep(0.05)
    kube.end_watches()
    await kube.wait_for_watches(1, resource, timeout=REOPENED_WITHIN_S)


async def test_a_pod_watch_broken_as_soon_as_it_opens_is_one_warning_and_established_once_it_works(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    subject = discovery(kube)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)  # established, said
        await dropped_as_soon_as_open(kube, "pods", monkeypatch)
        await eventually(lambda: watch_lines(caplog)[-1][0] == "INFO" and len(watch_lines(caplog)) > 1)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["INFO", "WARNING", "INFO"], lines
    assert lines[1][1].startswith("Kubernetes discovery: pod watch of namespace modelmesh-serving broken"), lines
    assert lines[2][1] == "Kubernetes discovery: pod watch of namespace modelmesh-serving established", lines


async def test_an_hpa_watch_broken_as_soon_as_it_opens_is_one_warning_and_works_again_once_it_works(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, backoff=lambda n: 0.02)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_hpas")
    await subject.start()
    try:
        await dropped_as_soon_as_open(kube, "horizontalpodautoscalers", monkeypatch)
        await eventually(lambda: watch_lines(caplog, *HPA_LINES) != [] and watch_lines(caplog, *HPA_LINES)[-1][0]
                         == "INFO")
    finally:
        await subject.close()
    lines = watch_lines(caplog, *HPA_LINES)
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert lines[0][1].startswith(f"HPA watch of namespace {NS} failing, keeping the bounds last seen"), lines
    assert lines[1][1] == f"HPA watch of namespace {NS} works again; the bounds are current", lines


async def test_a_pod_watch_refused_after_its_stream_dropped_warns_again_naming_the_refusal(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server unreachable (its streams dropped, its connections refused), then, before the watch worked
    again, its watch refused (a Role edited meanwhile: 403): the log said the first WARNING alone (`stream
    broken`) and the 403s at DEBUG, blaming the network for an RBAC refusal for as long as it lasted. A failure of
    another cause within a spell is a WARNING of its own."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    subject = discovery(kube)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)  # established, said
        await kube.pause()  # dropped, and no answer ...
        await eventually(lambda: len(watch_lines(caplog)) == 2)  # ... said
        kube.forbid("watch", "pods")
        await kube.resume()  # ... then refused
        await eventually(lambda: len(watch_lines(caplog)) == 3)
        kube.clear_faults()
        await eventually(lambda: len(watch_lines(caplog)) == 4)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["INFO", "WARNING", "WARNING", "INFO"], lines
    assert "403" not in lines[1][1], lines
    assert "403" in lines[2][1], lines
