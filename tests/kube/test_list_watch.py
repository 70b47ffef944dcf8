"""`ListWatch` against the fake Kubernetes API: what the reflector's rules mean for a consumer's copy.

The pod discovery, HPA and RuntimeScale tests cover the common paths through their owners; these cover what
only the shared loop decides: bookmarks, a 410 answered to the watch request itself, and an owner's bug.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import aiohttp
import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.kube.backoff import exponential_delay
from autoscaler.kube.list_watch import ListWatch
from autoscaler.kube.watch_ends import SHORT_LIVED_IN_A_ROW, SHORT_WATCH_S, STAYED_OPEN_S
from tests.fakes.kube import FakeKubeApi, RecordedRequest
from tests.support.background import in_background
from tests.support.chatter import chattering_pod
from tests.support.waiting import eventually

NS = "modelmesh-serving"
LABELS = {"modelmesh-service": "modelmesh-serving"}
log = logging.getLogger("tests.kube.list_watch")


class Copy:
    """What an owner keeps: the pod names, and how often it was handed a whole list."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.lists = 0

    def replace(self, items: list[dict[str, Any]]) -> None:
        self.names = {item["metadata"]["name"] for item in items}
        self.lists += 1

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.names.discard(name)
        else:
            self.names.add(name)


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
async def api(kube: FakeKubeApi) -> AsyncIterator[ApiClient]:
    settings = Configuration()
    settings.host = kube.url
    client = ApiClient(settings)
    yield client
    await client.close()  # type: ignore[no-untyped-call]


def pods_of(api: ApiClient) -> Callable[..., Awaitable[aiohttp.ClientResponse]]:
    # Imported here: the generated CoreV1Api module takes 1-3 s of a CPU to import, which every xdist worker paid
    # at collection, where only the one running this file needs it.
    from kubernetes.aio.client import CoreV1Api

    def endpoint(**options: Any) -> Awaitable[aiohttp.ClientResponse]:
        return CoreV1Api(api).list_namespaced_pod_without_preload_content(NS, **options)

    return endpoint


def pod_watch(api: ApiClient, copy: Copy, backoff_s: float = 0.02, backoff: Callable[[int], float] | None = None,
              **options: Any) -> ListWatch:
    """The loop over the fake's pods, waiting `backoff(n)` (else `backoff_s`) after the n-th failure in a row."""
    return ListWatch(pods_of(api), "pods", NS, on_list=copy.replace, on_event=copy.apply,
                     backoff=backoff or (lambda n: backoff_s), request_timeout_s=2.0, watch_timeout_s=30,
                     filters={"label_selector": "modelmesh-service"}, log=log, name="test pod watch", **options)


def recorded(wait: Callable[[int], float] = lambda n: 0.01) -> tuple[list[int], Callable[[int], float]]:
    """A backoff answering `wait(n)` that records each n it is asked for: the failures in a row, as the loop
    counts them (the list, and the backoff)."""
    failures: list[int] = []

    def backoff(n: int) -> float:
        failures.append(n)
        return wait(n)

    return failures, backoff


def running(loop: ListWatch) -> contextlib.AbstractAsyncContextManager[object]:
    """`loop` runs for the block."""
    return in_background(loop.run())


def pod_lists(kube: FakeKubeApi) -> list[dict[str, str]]:
    return [r.query for r in kube.requests if r.resource == "pods" and not r.query.get("watch")]


async def test_a_bookmark_moves_the_resume_point_past_a_compaction(kube: FakeKubeApi, api: ApiClient) -> None:
    copy = Copy()
    async with running(pod_watch(api, copy)):
        await kube.wait_for_watches(1, "pods")
        kube.add_pod(NS, "unwatched", labels={"app": "web"})  # the version moves on; the watch sees nothing
        kube.send_bookmarks()
        await asyncio.sleep(0.2)  # the bookmark is on its way; nothing observable changes
        kube.compact()  # history before the bookmark is gone: only the bookmark's version can resume
        kube.end_watches()
        kube.add_pod(NS, "after", labels=LABELS)

        await eventually(lambda: "after" in copy.names)
        assert copy.lists == 1


async def test_a_410_answer_to_the_watch_request_lists_again_at_once(kube: FakeKubeApi, api: ApiClient) -> None:
    kube.add_pod(NS, "before", labels=LABELS)
    copy = Copy()
    async with running(pod_watch(api, copy, backoff_s=60, list_from_cache=True)):
        await kube.wait_for_watches(1, "pods")
        kube.fail(r"/pods$", status=410, times=1)  # the next request, the resumed watch, is told "Expired"
        kube.end_watches()
        kube.delete_pod(NS, "before")
        kube.add_pod(NS, "during", labels=LABELS)

        await eventually(lambda: copy.names == {"during"})  # within seconds: no 60 s backoff was waited
        first, again = pod_lists(kube)
        assert first.get("resourceVersion") == "0"  # from the watch cache
        assert "resourceVersion" not in again  # after "Expired", a consistent read


async def test_an_owner_that_fails_is_logged_with_its_traceback_and_retried(
    kube: FakeKubeApi, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_pod(NS, "p1", labels=LABELS)
    copy = Copy()
    calls = 0

    def flaky_replace(items: list[dict[str, Any]]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("owner bug")
        copy.replace(items)

    loop = ListWatch(pods_of(api), "pods", NS, on_list=flaky_replace, on_event=copy.apply,
                     backoff=lambda n: 0.02, request_timeout_s=2.0, watch_timeout_s=30, log=log,
                     name="test pod watch")
    async with running(loop):
        await eventually(lambda: copy.names == {"p1"})
        [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert "test pod watch: unexpected error" in record.getMessage()
        assert record.exc_info is not None and "owner bug" in str(record.exc_info[1])


async def test_watches_that_end_at_once_are_not_reopened_in_a_tight_loop(kube: FakeKubeApi, api: ApiClient) -> None:
    """A proxy that cuts every stream, or an API server shutting down, ends each watch at once with nothing in
    it: client-go's reflector calls that a "very short watch" and backs off; reopening at once would flood it."""
    kube.add_pod(NS, "p1", labels=LABELS)
    copy = Copy()
    async with running(pod_watch(api, copy)):
        await kube.wait_for_watches(1, "pods")
        kube.cut_watches = True
        kube.end_watches()
        kube.clear_requests()
        await asyncio.sleep(1.5)
        kube.cut_watches = False
        watches = [r for r in kube.requests if r.query.get("watch")]
        kube.add_pod(NS, "p2", labels=LABELS)
        await eventually(lambda: copy.names == {"p1", "p2"})

    assert len(watches) <= 2
    assert copy.lists == 1  # resumed from the last version seen: nothing was listed again


async def test_a_watch_broken_as_soon_as_it_opens_backs_off_more_each_time(kube: FakeKubeApi, api: ApiClient) -> None:
    """A failure loop (a proxy that breaks every stream once it opens): each break is the next failure in a row, so
    the owner's backoff grows; only a watch that worked (open `SHORT_WATCH_S`, or an event handed over) starts the
    count again."""
    failures, backoff = recorded()
    copy = Copy()
    async with running(pod_watch(api, copy, backoff=backoff)):
        for _ in range(5):
            await kube.wait_for_watches(1, "pods")
            await asyncio.sleep(0.05)  # opened: its answer reached the loop
            kube.end_watches(abort=True)
        await kube.wait_for_watches(1, "pods")

    assert failures == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("worked", ["open a second", "carried an event"])
async def test_a_watch_that_worked_before_its_stream_broke_is_reopened_after_the_first_backoff_each_time(
    kube: FakeKubeApi, api: ApiClient, worked: str
) -> None:
    """A stream cut on a load balancer's clock, however soon after the reopen: a watch open `SHORT_WATCH_S`, or one
    that carried an event (a BOOKMARK too), worked (client-go's reflector: only a "very short watch" backs off), so
    each cut is the first failure of a new spell. Judged by 5 s open, a watch reopened after 1 s and cut 4 s later
    was the next failure in a row: 1, 2, 4 ... 30 s closed. (So are up to `SHORT_LIVED_IN_A_ROW` of them in a row
    that ended within `STAYED_OPEN_S`: a restart storm; more are the next test's.)"""
    failures, backoff = recorded()
    copy = Copy()
    async with running(pod_watch(api, copy, backoff=backoff)):
        for n in range(SHORT_LIVED_IN_A_ROW):
            await kube.wait_for_watches(1, "pods")
            if worked == "open a second":
                await asyncio.sleep(SHORT_WATCH_S + 0.1)
            else:
                name = f"p{n}"
                kube.add_pod(NS, name, labels=LABELS)
                await eventually(lambda name=name: name in copy.names)  # type: ignore[misc]
            kube.end_watches(abort=True)
        await kube.wait_for_watches(1, "pods")

    assert failures == [1] * SHORT_LIVED_IN_A_ROW


async def test_watches_broken_after_their_first_event_again_and_again_back_off_until_one_stays_open(
    kube: FakeKubeApi, api: ApiClient
) -> None:
    """A proxy that breaks every stream after its first bytes, in a busy namespace: each watch carried an event, so
    by the reflector's rule it had worked and each break was the first failure of a new spell, reopened after the
    first backoff forever (0.5 to 1 s: some 100 watch requests a minute per watch and namespace). Past
    `SHORT_LIVED_IN_A_ROW` watches in a row that ended within `STAYED_OPEN_S`, the backoff doubles to its cap; a
    watch that then stays open starts the count again; the owner hears that the loop works (its "works again" or
    "established") from the list and those first watches, then only from the watch that stayed open."""
    failures, backoff = recorded(partial(exponential_delay, initial_s=0.05, cap_s=0.4))
    copy = Copy()
    works: list[float] = []
    kube.drop_watches_after = 1
    async with chattering_pod(kube, NS, LABELS), running(
        pod_watch(api, copy, backoff=backoff, on_works=lambda: works.append(asyncio.get_running_loop().time()))
    ):
        await asyncio.sleep(3.0)
        # At least the throttle's first three waits, however slowly a loaded machine got through them.
        await eventually(lambda: len(failures) >= SHORT_LIVED_IN_A_ROW + 3)
        watches = sum(1 for r in kube.requests if r.query.get("watch"))
        told = len(works)
        kube.drop_watches_after = None
        await kube.wait_for_watches(1, "pods")
        await asyncio.sleep(STAYED_OPEN_S + 0.2)
        kube.end_watches(abort=True)
        await eventually(lambda: len(failures) > watches)

    # 0.05 s three times, then 0.1, 0.2 and 0.4 s: some 11 watches in 3 s (at the first backoff: over 40)
    assert watches <= 15, (watches, failures)
    churned = SHORT_LIVED_IN_A_ROW
    assert failures[:churned + 3] == [1] * churned + [2, 3, 4], failures
    assert failures[-1] == 1, failures  # the watch that stayed open worked: its break is a new spell's first
    assert told == 1 + churned, (told, failures)
    assert len(works) > told


async def test_watches_ended_cleanly_after_their_first_events_again_and_again_are_reopened_at_once(
    kube: FakeKubeApi, api: ApiClient
) -> None:
    """A proxy ending each stream cleanly after its first events (as a server's `timeoutSeconds` ends one, or an API
    server shutting down): no failure, so no backoff, however many in a row, as client-go's reflector reopens a
    cleanly ended watch at once; only a watch that carried nothing waits, to a second after it opened (about two
    watch requests a second). Throttled past `SHORT_LIVED_IN_A_ROW` in a row, such a watch waited `backoff(k)` with
    no watch open, said open and healthy all the while, up to 30 s."""
    asked, backoff = recorded(lambda n: 5.0)
    paused_after: list[RecordedRequest] = []  # the watch each pause of the loop followed

    async def sleep(seconds: float) -> None:
        paused_after.append(watches_of(kube)[-1])
        await asyncio.sleep(seconds)

    kube.cut_watches = True
    carried = SHORT_LIVED_IN_A_ROW + 1  # one past the throttle, counted with clean ends
    async with chattering_pod(kube, NS, LABELS), running(pod_watch(api, Copy(), backoff=backoff, sleep=sleep)):
        await eventually(lambda: sum(1 for watch in watches_of(kube) if watch.events) > carried)

    # Asked of what each reopen waited on, not of a count in a window of the clock (2 watches in 3 s on a loaded
    # machine, where each carried nothing and waited its second): no backoff, and no pause after a watch that
    # carried events, however many ended so in a row.
    assert asked == [], asked
    assert [watch.events for watch in paused_after if watch.events] == [], [w.events for w in watches_of(kube)]


def watches_of(kube: FakeKubeApi) -> list[RecordedRequest]:
    """The watch requests the fake received, in order, each with the events its stream has sent so far."""
    return [r for r in kube.requests if r.query.get("watch")]


async def test_a_break_after_many_clean_ends_is_the_first_of_its_spell(kube: FakeKubeApi, api: ApiClient) -> None:
    """Clean ends count for none of the throttle: a proxy that ended every stream for a while, then one stream cut,
    waits `backoff(1)` as any first break does. Counted with the short-lived watches, that cut waited `backoff(6)`
    or more (17 s at the defaults, where it reopens in half a second)."""
    failures, backoff = recorded(lambda n: 0.05)
    kube.cut_watches = True
    async with chattering_pod(kube, NS, LABELS), running(pod_watch(api, Copy(), backoff=backoff)):
        # Past the throttle's count of watches that carried events, however long a loaded machine takes to get there
        # (it was 3 s of the clock, and 2 watches in them on a loaded machine).
        await eventually(lambda: sum(1 for watch in watches_of(kube) if watch.events) > SHORT_LIVED_IN_A_ROW + 1)
        kube.cut_watches = False
        await kube.wait_for_watches(1, "pods")
        kube.end_watches(abort=True)
        await eventually(lambda: bool(failures))

    assert failures == [1], failures


async def test_a_restart_storm_that_refuses_each_reopen_is_over_as_soon_as_before_the_throttle(
    kube: FakeKubeApi, api: ApiClient
) -> None:
    """A control plane restarted one API server after another: five cuts of a fresh watch that carried events, each
    reopen refused twice (503 "shutting down") before one opens. The throttle grows with the watches in a row that
    ended within `STAYED_OPEN_S`, not with every refusal of the storm: the refusals after a cut wait as any answered
    failures in a row do (`backoff(1)`, `backoff(2)`: the cut, a stream broken, was no answer). Counted with them, the
    last cut waited `backoff(5)` to `backoff(7)` (27 s at the defaults, where the watch was open again 3.8 s after it
    before the throttle)."""
    delays: list[float] = []
    failures, backoff = recorded(lambda n: 0.05 * 2 ** (n - 1))
    cuts = 1 + SHORT_LIVED_IN_A_ROW + 2  # the first of a watch open since the start, then five of fresh ones
    async with chattering_pod(kube, NS, LABELS), running(pod_watch(api, Copy(), backoff=backoff)):
        await kube.wait_for_watches(1, "pods")
        await asyncio.sleep(STAYED_OPEN_S)  # the first watch stayed open
        loop = asyncio.get_running_loop()
        for _ in range(cuts):
            await kube.wait_for_watches(1, "pods")
            await asyncio.sleep(0.3)
            kube.fail(rf"/namespaces/{NS}/pods$", status=503, times=2, message="apiserver is shutting down")
            kube.end_watches(abort=True)
            cut = loop.time()
            await asyncio.sleep(0.01)
            await kube.wait_for_watches(1, "pods")
            delays.append(loop.time() - cut)

    # The backoffs the last cut and its two refusals waited: 0.2 s (the throttle), then 0.05 + 0.1 s, the first and
    # second answered failures in a row (counted with the refusals: 0.8 + 1.6 + 3.2). Asked of the backoff, not of
    # the clock: a loaded machine stretches each wait.
    assert failures[-3:] == [3, 1, 2], (failures, delays)


@pytest.mark.parametrize("request_kind", ["list", "watch"])
async def test_a_throttled_list_or_watch_waits_as_long_as_the_server_asks(
    kube: FakeKubeApi, api: ApiClient, request_kind: str
) -> None:
    """An API server shedding load (API Priority and Fairness, max-in-flight) answers 429 with `Retry-After`.
    client-go's REST client waits that long before it asks again; a loop on its own 20 ms backoff came back
    within the server's wait, adding to the load it was asked to take away."""
    kube.add_pod(NS, "p1", labels=LABELS)
    copy = Copy()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    if request_kind == "list":
        kube.fail(r"/pods$", status=429, times=1, retry_after=7)
    async with running(pod_watch(api, copy, sleep=sleep)):
        await kube.wait_for_watches(1, "pods")
        if request_kind == "watch":
            kube.fail(r"/pods$", status=429, times=1, retry_after=7)  # the resumed watch is refused
            kube.end_watches()
            kube.add_pod(NS, "p2", labels=LABELS)
            await eventually(lambda: copy.names == {"p1", "p2"})
        else:
            await eventually(lambda: copy.names == {"p1"})

    assert [r.status for r in kube.requests if r.resource == "pods"].count(429) == 1
    assert 7 in waits  # the server's Retry-After, not the loop's own 20 ms


def overflowing(failures: int) -> float:
    """A backoff written as the HPA watch's was before 0acde07, past its 1,025th failure: `2 ** n` as an int
    too large for a float."""
    return min(30.0, 0.5 * int(2 ** (failures + 1100)))


async def test_a_backoff_that_raises_is_said_once_and_the_pods_come_back_when_the_server_answers(
    kube: FakeKubeApi, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner's backoff raised inside the retry handler: the loop's task ended with the exception, which no
    one reads, and the pods were never listed again. It now waits the fallback backoff and says so once."""
    kube.add_pod(NS, "p1", labels=LABELS)
    kube.fail(r"/pods$", status=503, times=3)
    copy = Copy()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    loop = ListWatch(pods_of(api), "pods", NS, on_list=copy.replace, on_event=copy.apply, backoff=overflowing,
                     request_timeout_s=2.0, watch_timeout_s=30, log=log, name="test pod watch", sleep=sleep)
    with caplog.at_level(logging.DEBUG, logger=log.name):
        async with running(loop):
            await eventually(lambda: copy.names == {"p1"})
    assert waits == [0.5, 1.0, 2.0]  # the fallback: 0.5 s doubling to 30 s
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage().startswith("test pod watch: its backoff raised OverflowError(")
    assert "(failures in a row: 1)" in record.getMessage()
    assert "waiting 0.5 s doubling to 30 s between retries instead" in record.getMessage()
    assert record.exc_info is not None


@pytest.mark.parametrize("answer", [math.inf, math.nan, -1.0])
async def test_a_backoff_that_answers_no_wait_is_replaced_until_it_answers_one(
    kube: FakeKubeApi, api: ApiClient, caplog: pytest.LogCaptureFixture, answer: float
) -> None:
    """An infinite wait stopped the watch for good without a word; NaN or a negative one slept not at all and
    hammered the API server. The fallback waits instead, and the log says when the backoff works again."""
    kube.add_pod(NS, "p1", labels=LABELS)
    kube.fail(r"/pods$", status=503, times=4)
    copy = Copy()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    def broken_twice(failures: int) -> float:
        return answer if failures <= 2 else 0.25

    loop = ListWatch(pods_of(api), "pods", NS, on_list=copy.replace, on_event=copy.apply, backoff=broken_twice,
                     request_timeout_s=2.0, watch_timeout_s=30, log=log, name="test pod watch", sleep=sleep)
    with caplog.at_level(logging.INFO, logger=log.name):
        async with running(loop):
            await eventually(lambda: copy.names == {"p1"})
    assert waits == [0.5, 1.0, 0.25, 0.25]
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert said == [
        (logging.ERROR, f"test pod watch: its backoff answered {answer!r} s, not a wait (failures in a row: 1); "
                        "retrying anyway, waiting 0.5 s doubling to 30 s between retries instead, until it works "
                        "again. This is a bug of the adapter: please report it with this message"),
        (logging.INFO, "test pod watch: its backoff works again"),
    ]


async def test_an_owner_whose_failure_handler_raises_is_said_once_and_still_gets_its_pods(
    kube: FakeKubeApi, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """`on_failure` raised inside the retry handler: the loop ended and the owner's copy stayed as it was."""
    kube.fail(r"/pods$", status=503, times=3)
    kube.add_pod(NS, "p1", labels=LABELS)
    copy = Copy()

    def failing_handler(error: Exception, failures: int) -> None:
        raise RuntimeError(f"owner bug at failure {failures}")

    loop = ListWatch(pods_of(api), "pods", NS, on_list=copy.replace, on_event=copy.apply,
                     on_failure=failing_handler, backoff=lambda n: 0.02, request_timeout_s=2.0, watch_timeout_s=30,
                     log=log, name="test pod watch")
    async with running(loop):
        await eventually(lambda: copy.names == {"p1"})
        kube.add_pod(NS, "p2", labels=LABELS)
        await eventually(lambda: copy.names == {"p1", "p2"})  # and it watches
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage().startswith(
        "test pod watch: its failure handler raised RuntimeError('owner bug at failure 1') when told of list pods in "
        "namespace modelmesh-serving")
    assert "its failure is not recorded" in record.getMessage()


async def test_an_owner_that_keeps_failing_is_said_once_with_its_traceback_and_its_recovery_said(
    kube: FakeKubeApi, api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """An owner's `on_list` that raised at every list wrote "unexpected error" and a whole traceback at each retry,
    every 0.5 to 30 s for as long as it lasted. Now the traceback comes once, the repeats at DEBUG, and an INFO
    says when the owner takes the list again."""
    kube.add_pod(NS, "p1", labels=LABELS)
    copy = Copy()
    calls = 0

    def broken_for_a_while(items: list[dict[str, Any]]) -> None:
        nonlocal calls
        calls += 1
        if calls <= 5:
            raise RuntimeError(f"owner bug {calls}")
        copy.replace(items)

    loop = ListWatch(pods_of(api), "pods", NS, on_list=broken_for_a_while, on_event=copy.apply,
                     backoff=lambda n: 0.01, request_timeout_s=2.0, watch_timeout_s=30, log=log,
                     name="test pod watch")
    with caplog.at_level(logging.DEBUG, logger=log.name):
        async with running(loop):
            await eventually(lambda: copy.names == {"p1"})
            await kube.wait_for_watches(1, "pods")
    said = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records if r.levelno >= logging.INFO]
    assert [(level, traceback) for level, _, traceback in said] == [(logging.ERROR, True), (logging.INFO, False)], said
    assert said[0][1].startswith("test pod watch: unexpected error RuntimeError('owner bug 1')"), said
    assert said[1][1] == "test pod watch: works again after the unexpected error (5 failures in a row)"
    repeats = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "owner bug" in r.getMessage()]
    assert len(repeats) == 4 and all("exc_info" not in message for message in repeats), repeats
    assert all(r.exc_info is None for r in caplog.records if r.levelno == logging.DEBUG)
