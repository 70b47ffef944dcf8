"""Pod discovery through kube-apiserver graceful shutdowns and restarts (a control-plane rolling restart), as the
platform engineer reads its log: the watch is said broken by what the server answered, never blamed on a proxy.

What a real kube-apiserver does, from its sources (k8s.io/apiserver `pkg/server/genericapiserver.go` `RunWithContext`,
`filters/watch_termination.go`, `filters/waitgroup.go`, `endpoints/handlers/watch.go`, `storage/cacher/cacher.go`):
once it stops accepting requests (after `--shutdown-delay-duration`) it ends every open watch cleanly, if
`--shutdown-watch-termination-grace-period` is set (else its streams are cut as it exits), and answers every new
request `503 "apiserver is shutting down"` with `Retry-After: 1` (`--shutdown-send-retry-after`: 429 with
`Retry-After: 5`), until it stops listening (connection refused). The new one answers watches 429 "storage is
(re)initializing" until its watch cache is ready, from a fresh list, so an old resourceVersion is 410 Expired. So a
watch ends "very short" (within a second, nothing in it: `autoscaler.kube.watch_ends.SHORT_WATCH_S`) at most once a
shutdown, the one reopened within the second before it, and never twice in a row: the next is refused, and one on the
restarted server works. The very-short rule (`ListWatch._very_short`: a failure, said as "streams end as soon as they
open", from the second since a watch worked) stays silent through it, restart after restart; only the refusals are
said, and the recovery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.selfmetrics import AdapterMetrics
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import TRITON, discovery
from tests.sources.test_kube_watch_flapping import NS, watch_lines
from tests.sources.test_kube_watch_very_short import watch_failures
from tests.support.waiting import eventually

PODS = r"/namespaces/[^/]+/pods$"
VERY_SHORT_WORDS = "streams end as soon as they open"
RESTARTS = 2
"""A rolling restart's servers, one after another: the second shutdown comes once a watch worked on the first."""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        server.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
        yield server


async def shut_down_and_restart(kube: FakeKubeApi, restart: int, caplog: pytest.LogCaptureFixture) -> None:
    """One kube-apiserver's graceful shutdown and restart, the adapter's pod watch reopened within the second
    before it stops accepting requests (the one very short watch a shutdown can give), as the sources say; returns
    once the log says the watch works again."""
    lines = len(watch_lines(caplog))
    kube.end_watches()  # the watch's timeoutSeconds ran out: reopened at once
    await kube.wait_for_watches(1, "pods")
    await asyncio.sleep(0.05)  # its answer reached the adapter
    shutting_down = kube.fail(PODS, 503, times=None, message="apiserver is shutting down", retry_after=1)
    kube.end_watches()  # NotAcceptingNewRequest: open watches end, new requests get 503 Retry-After: 1
    await eventually(lambda: shutting_down.hits >= 1, timeout=15)
    await kube.pause()  # it stops listening and exits
    kube.clear_faults()
    kube.set_ready(NS, _a_pod(kube), restart % 2 == 1)  # a change while it was down
    kube.compact()  # the new server's watch cache starts from a fresh list: the adapter's version is gone
    await asyncio.sleep(0.5)
    initializing = kube.fail(PODS, 429, times=1, message="storage is (re)initializing", retry_after=1)
    await kube.resume()
    await eventually(lambda: initializing.hits >= 1, timeout=15)
    await eventually(lambda: len(watch_lines(caplog)) > lines and watch_lines(caplog)[-1][0] == "INFO"
                     and "established" in watch_lines(caplog)[-1][1], timeout=20)


def _a_pod(kube: FakeKubeApi) -> str:
    return str(kube.objects("pods", NS)[0]["metadata"]["name"])


async def test_a_rolling_restart_says_the_servers_refusals_and_no_proxy(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="autoscaler.sources.kube_pods")
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)  # established
        for restart in range(RESTARTS):
            await shut_down_and_restart(kube, restart, caplog)
        await asyncio.sleep(1.5)  # a watch that worked: nothing more to say
        healthy = subject.healthy_for(NS)
        failures = watch_failures(metrics)
    finally:
        await subject.close()
    said = [(level, text) for level, text in watch_lines(caplog) if level != "DEBUG"]
    ends = [r.getMessage() for r in caplog.records if "ended at once with nothing in it" in r.getMessage()]
    assert len(ends) == RESTARTS, ends  # each shutdown gave its one very short watch
    assert not [text for _, text in said if VERY_SHORT_WORDS in text], said
    warnings = [text for level, text in said if level == "WARNING"]
    assert warnings and all("broken" in text for text in warnings), said
    assert any("apiserver is shutting down" in text for text in warnings), said
    assert said[-1] == ("INFO", f"Kubernetes discovery: pod watch of namespace {NS} established"), said
    assert healthy
    assert failures["server_error"] >= RESTARTS and failures["expired"] == RESTARTS, failures
