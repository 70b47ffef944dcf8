"""Pod discovery while its watches end within seconds of opening, again and again, as the operator reads it: the
`modelmesh_autoscaler_watch_established` gauge and discovery's health against what the API server has open, and the
log's `broken` / `established` lines.

Past three watches in a row that ended within 3 s (`SHORT_LIVED_IN_A_ROW`, `STAYED_OPEN_S`) the loop throttled the
reopen: a watch ended cleanly (a proxy ending streams, an API server shutting down) then waited up to 30 s with no
watch open while the gauge read 1, discovery read healthy and nothing was logged. A clean end is now reopened at once
(client-go's reflector does so too); only a broken one is throttled, and that is a failure: the gauge reads 0 and
discovery unhealthy until a watch is open again. Nor is a throttled watch said `established` at each reopen: the log
would flap `broken` / `established` at every cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from autoscaler.kube.backoff import spread_delay
from autoscaler.kube.watch_ends import SHORT_LIVED_IN_A_ROW, STAYED_OPEN_S
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources import kube_pods
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import discovery
from tests.sources.test_kube_watch_flapping import watch_lines
from tests.support.background import in_background
from tests.support.chatter import chattering_pod
from tests.support.waiting import eventually
from tests.support.watch_bars import NEVER_S, watches_judged

NS = "modelmesh-serving"
LABELS = {"modelmesh-service": "modelmesh-serving"}
ESTABLISHED = "modelmesh_autoscaler_watch_established"
STEP_S = 0.01


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@dataclass(frozen=True)
class Said:
    """What the pod watch's gauge and discovery's health said at one moment the loop was in no watch: as a pod list
    or watch request reached the API server (a reopen goes out once the watch before it ended, after any pause), or
    as the loop asked for a backoff (before its wait, the failure said). The gauge must read 0 then, whatever came
    between: asked of the loop, not sampled on the clock while the fake had no watch open (a loaded machine
    stretches the moment before the client reads a watch's end, and those samples added up past any bound)."""

    established: float | None
    healthy: bool

    @classmethod
    def now(cls, metrics: AdapterMetrics, subject: KubePodDiscovery) -> Said:
        return cls(metrics.registry.get_sample_value(ESTABLISHED, {"watch": "pods", "namespace": NS}),
                   subject.healthy_for(NS))


def said_at_each_request(kube: FakeKubeApi, metrics: AdapterMetrics, subject: KubePodDiscovery) -> list[Said]:
    said: list[Said] = []
    kube.on_request(r"/pods$", lambda: said.append(Said.now(metrics, subject)), method="GET", times=None)
    return said


def backoffs_asked(monkeypatch: pytest.MonkeyPatch, then: Callable[[], None] = lambda: None) -> list[int]:
    """The failures in a row of each backoff pod discovery asks for, in order; `then()` runs at each ask."""
    asked: list[int] = []

    def recorded(failures: int, initial_s: float, max_s: float) -> float:
        asked.append(failures)
        then()
        return spread_delay(failures, initial_s, max_s)

    monkeypatch.setattr(kube_pods, "spread_delay", recorded)
    return asked


async def ending_each_watch(kube: FakeKubeApi, after_s: float) -> None:
    """End each pod watch cleanly `after_s` after it opened, as a proxy ending streams on its own clock does."""
    while True:
        await kube.wait_for_watches(1, "pods", timeout=60)
        await asyncio.sleep(after_s)
        kube.end_watches()
        await asyncio.sleep(STEP_S)


async def test_watches_ended_cleanly_again_and_again_are_reopened_at_once_never_read_open_while_closed(
    kube: FakeKubeApi, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy ending every stream cleanly 0.3 s after it opens, in a busy namespace (each carries events): each
    watch is reopened at once, as client-go's reflector does, never after a backoff; and the gauge reads 0 while
    none is open. (With a 2 s backoff, from the fourth in a row the pods went unwatched 2 s at a time, the gauge at 1
    and discovery healthy, nothing logged.)"""
    backoffs = backoffs_asked(monkeypatch)
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics, backoff_initial_s=2.0, backoff_max_s=2.0)
    said = said_at_each_request(kube, metrics, subject)
    reopens = SHORT_LIVED_IN_A_ROW + 2  # one past the throttle's count, and the next
    async with chattering_pod(kube, NS, LABELS):
        await subject.start()
        try:
            await kube.wait_for_watches(1, "pods")
            async with in_background(ending_each_watch(kube, after_s=0.3)):
                await eventually(lambda: len(said) > reopens + 1)  # the list, the first watch, then the reopens
        finally:
            await subject.close()

    # Reopened at once: no backoff asked for (asked of the loop, not of the clock: a loaded machine stretches any
    # reopen; throttled, from the fourth clean end in a row, it waited 2 s each).
    assert backoffs == [], backoffs
    assert [s.established for s in said] == [0.0] * len(said), said


async def test_watches_ended_as_soon_as_they_open_read_closed_while_the_loop_waits_to_reopen(
    kube: FakeKubeApi,
) -> None:
    """A proxy ending every stream as soon as it opens: a watch that carried nothing is reopened a second after it
    opened (a "very short watch"), and the gauge reads 0 that second, not 1 as if the pods were watched."""
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics)
    said = said_at_each_request(kube, metrics, subject)
    kube.add_pod(NS, "p1", labels=LABELS)
    await subject.start()
    try:
        await kube.wait_for_watches(1, "pods")
        kube.cut_watches = True
        kube.end_watches()
        await eventually(lambda: len(said) >= 5)  # the list, the first watch, three reopens after a second's pause
    finally:
        await subject.close()

    assert [s.established for s in said] == [0.0] * len(said), said


async def test_watches_broken_again_and_again_read_closed_while_throttled(
    kube: FakeKubeApi, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy breaking every stream after its first event: past `SHORT_LIVED_IN_A_ROW` the reopen waits longer
    each time, and all that time the gauge reads 0 and discovery unhealthy. The first cuts (a restart storm's, of a
    watch that worked) are drops resumed at once where they left off: the gauge reads 0, but nothing is missed, so
    discovery is current (`watch_ends.DROPPED_GRACE_S`)."""
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics, backoff_initial_s=0.2, backoff_max_s=1.0)
    said = said_at_each_request(kube, metrics, subject)
    said_waiting: list[Said] = []
    backoffs = backoffs_asked(monkeypatch, then=lambda: said_waiting.append(Said.now(metrics, subject)))
    async with chattering_pod(kube, NS, LABELS):
        await subject.start()
        try:
            await open_to_the_adapter(kube, metrics, subject)  # a cut before then breaks the request, not a watch
            await asyncio.sleep(0.1)  # and the chatter's events with it: it worked, so its cut is the storm's first
            kube.drop_watches_after = 1
            kube.end_watches(abort=True)
            throttled = SHORT_LIVED_IN_A_ROW + 2  # two reopens past the storm's count
            await eventually(lambda: len(backoffs) >= throttled and len(said) >= 2 + throttled)
        finally:
            await subject.close()

    assert backoffs[SHORT_LIVED_IN_A_ROW:] == sorted(set(backoffs[SHORT_LIVED_IN_A_ROW:])), backoffs  # it was throttled
    # Closed from each break on: as each wait began, and as each reopen went out (after the list and the first watch);
    # out of date once throttled, not while the storm's drops are resumed at once.
    storm = SHORT_LIVED_IN_A_ROW
    expected = [(0.0, True)] * storm + [(0.0, False)] * (len(said_waiting) - storm)
    assert [(s.established, s.healthy) for s in said_waiting] == expected, said_waiting
    reopened = said[2:]
    expected = [(0.0, True)] * storm + [(0.0, False)] * (len(reopened) - storm)
    assert [(s.established, s.healthy) for s in reopened] == expected, said


async def open_to_the_adapter(kube: FakeKubeApi, metrics: AdapterMetrics, subject: KubePodDiscovery) -> None:
    """Until the pod watch the fake has open (the one after any cut) is open to the adapter too: its answer read,
    the gauge at 1. A cut before then breaks the request, not a watch."""
    await kube.wait_for_watches(1, "pods", timeout=30)
    await eventually(lambda: Said.now(metrics, subject).established == 1.0)


async def test_a_watch_cut_a_second_or_two_after_it_opens_again_and_again_is_said_broken_once_not_at_each_cut(
    kube: FakeKubeApi,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streams cut 1.3 s after each reopen: the first `SHORT_LIVED_IN_A_ROW` cuts of a fresh watch are a restart
    storm's (each said, and the reopened watch `established`); from then on the watch is said failing until one
    stays open `STAYED_OPEN_S`, not `established` at its second and `broken` at its cut, every time.

    Each cut comes after the watch worked and before it stayed open, whatever a loaded machine makes of "1.3 s":
    while the cuts go on a watch works as it opens and none stays open (`watches_judged`). Cut 1.3 s after the
    fake had it open by the test's clock, a watch the client read 0.3 s late had not worked, and one stalled past
    3 s had stayed open."""
    cuts = SHORT_LIVED_IN_A_ROW + 4
    caplog.set_level("INFO", logger="autoscaler.sources.kube_pods")
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)  # established, said
        await asyncio.sleep(STAYED_OPEN_S)  # the first watch stays open: its cut is not of a short-lived one
        kube.end_watches(abort=True)
        await kube.wait_for_watches(1, "pods", timeout=30)  # that cut judged, under the shipped bars
        with watches_judged(monkeypatch, works_after_s=0.0, stays_open_after_s=NEVER_S):
            for _ in range(cuts - 1):
                await open_to_the_adapter(kube, metrics, subject)
                kube.end_watches(abort=True)
            await kube.wait_for_watches(1, "pods", timeout=30)  # the last cut judged
        await open_to_the_adapter(kube, metrics, subject)
        await asyncio.sleep(STAYED_OPEN_S + 0.2)  # this one stays open (on the adapter's clock too) ...
        kube.end_watches()  # ... and ends cleanly: opened under a bar none reaches, it is judged as it ends
        await eventually(lambda: watch_lines(caplog)[-1][0] == "INFO")
    finally:
        await subject.close()
    levels = [level for level, _ in watch_lines(caplog)]
    # the first cut (of the watch open since the start) and the storm's three: a WARNING each, an INFO after each
    # but the last; then nothing until the watch stays open
    assert levels == ["INFO"] + ["WARNING", "INFO"] * (SHORT_LIVED_IN_A_ROW + 1), watch_lines(caplog)
