"""An exporter that answers, but with no usable ModelMesh reading (a NaN request rate, or no ModelMesh success
timestamp), is a source problem, as the Prometheus source's garbage values are. Before, the pod silently turned
stale: /debug `source.problems` was empty, `source_errors_total` counted nothing, no log line named the pod, and
the pod's fresh GPU reading was thrown away with the load signals ("gpu missing"), although GPU freshness is
judged on its own.

A real exporter stand-in on a real socket, whose answer the test changes between refreshes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery

KEY = RuntimeKey("ml", "modelmesh-serving-nan")


def exposition(rps: str | None, gpu: float, modelmesh_timestamp: bool = True, rates: bool = True) -> str:
    """An exporter's answer; `rps` None leaves the request rate out (beside the other rates), `rates` False
    leaves every rate out, as an exporter writes it before its second ModelMesh read."""
    now = time.time()
    lines = [f'modelmesh_pod_gpu_busy_ratio{{gpu="0",uuid="GPU-0"}} {gpu}',
             'modelmesh_exporter_collector_success{collector="modelmesh"} 1',
             'modelmesh_exporter_collector_success{collector="gpu"} 1',
             f'modelmesh_exporter_last_success_timestamp_seconds{{collector="gpu"}} {now - 0.5}',
             f"modelmesh_exporter_time_seconds {now}", "modelmesh_pod_cache_used_ratio 0.5"]
    if rates:
        lines.append("modelmesh_pod_queue_delay_seconds 0")
        if rps is not None:
            lines.append(f"modelmesh_pod_requests_per_second {rps}")
    if modelmesh_timestamp:
        lines.append(f'modelmesh_exporter_last_success_timestamp_seconds{{collector="modelmesh"}} {now - 0.5}')
    return "\n".join(lines) + "\n"


async def serving(aiohttp_server: AiohttpServer, answer: Callable[[], web.Response]) -> str:
    """The /metrics URL of an exporter stand-in that answers `answer()`, built at each request, so a test changes
    the answer between refreshes."""
    async def exporter(request: web.Request) -> web.Response:
        return answer()

    app = web.Application()
    app.router.add_get("/metrics", exporter)
    server = await aiohttp_server(app)
    return f"http://127.0.0.1:{server.port}/metrics"


async def answering_and_404(aiohttp_server: AiohttpServer, text: Callable[[], str]) -> tuple[str, str]:
    """An exporter's URL that answers `text()` (written at each request), and a URL on a server that answers 404."""
    url = await serving(aiohttp_server, lambda: web.Response(text=text()))
    refused = await aiohttp_server(web.Application())
    return url, f"http://127.0.0.1:{refused.port}/nothing/here"


@pytest.mark.parametrize("garbled", [{"rps": "NaN"}, {"modelmesh_timestamp": False}, {"rps": None}],
                         ids=["nan-rate", "no-ts", "rate-missing-beside-the-others"])
async def test_an_answer_with_no_usable_modelmesh_reading_is_a_counted_problem_and_keeps_the_gpu(
        aiohttp_server: AiohttpServer, garbled: dict[str, object], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    answer = {"text": exposition("40", 0.5)}
    url = await serving(aiohttp_server, lambda: web.Response(text=answer["text"]))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("nan-0", True, url),))]), timeout_s=5.0)
    try:
        [good] = await source.collect(time.time())
        assert good.pods[0].requests_per_second == 40.0
        answer["text"] = exposition(**{"rps": "40", "gpu": 0.9, **garbled})  # type: ignore[arg-type]
        [held] = await source.collect(time.time())
        [problem] = source.problems(KEY)
        assert (problem.reason, problem.pod) == ("garbage", "nan-0"), problem
        assert "no usable ModelMesh reading" in problem.detail, problem.detail
        assert source.errors["garbage"] == 1
        [said] = [r.getMessage() for r in caplog.records if "nan-0" in r.getMessage()]
        assert said.endswith("reading it again at every refresh"), said  # the exporter answers: no backoff
        pod = held.pods[0]
        assert pod.requests_per_second == 40.0 and pod.sampled_at == good.pods[0].sampled_at  # held
        assert pod.gpu_busy == 0.9  # the fresh GPU reading, not the held one
        assert pod.gpu_sampled_at is not None and pod.gpu_sampled_at > good.pods[0].sampled_at  # type: ignore[operator]
        answer["text"] = exposition("40", 0.9)
        await source.collect(time.time())
        assert source.problems(KEY) == ()  # answered in full again: no longer a problem
        assert f"scrape of {KEY}/nan-0 recovered" in [r.getMessage() for r in caplog.records]  # said, as its start
    finally:
        await source.close()


@pytest.mark.parametrize("read_once", [True, False], ids=["first-read-done", "no-read-yet"])
async def test_an_exporter_without_its_rates_yet_is_held_unsaid_and_uncounted(
        aiohttp_server: AiohttpServer, read_once: bool, caplog: pytest.LogCaptureFixture) -> None:
    """A sidecar restarted (or a new pod's) publishes none of its rates until its second ModelMesh read, and no
    ModelMesh success time before its first: not fresh yet, as a pod before its first read. It was a garbage
    WARNING, a `garbage` problem and a source error at every refresh until the second read."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    answer = {"text": exposition("40", 0.5)}
    url = await serving(aiohttp_server, lambda: web.Response(text=answer["text"]))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, url),))]), timeout_s=5.0)
    try:
        [good] = await source.collect(time.time())
        answer["text"] = exposition(None, 0.9, modelmesh_timestamp=read_once, rates=False)
        for _ in range(3):
            [held] = await source.collect(time.time())
            assert source.problems(KEY) == ()
        assert source.errors["garbage"] == 0
        assert [r.getMessage() for r in caplog.records if "p-0" in r.getMessage()] == []
        pod = held.pods[0]
        assert pod.requests_per_second == 40.0 and pod.sampled_at == good.pods[0].sampled_at  # held
        assert pod.gpu_busy == 0.9  # its fresh GPU reading
        answer["text"] = exposition("41", 0.9)
        [read] = await source.collect(time.time())
        assert read.pods[0].requests_per_second == 41.0
        assert [r.getMessage() for r in caplog.records if "p-0" in r.getMessage()] == []  # nothing to recover from
    finally:
        await source.close()


async def test_an_exporter_whose_rates_never_come_is_said_after_a_few_of_its_reads(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """An exporter whose ModelMesh reads work (`collector_success` 1, its success time moving at each read) but
    which never publishes a rate (ModelMesh restarting at every read, reads further apart than its load window)
    held its pod unsaid for ever: the runtime never scaled down, and nothing said why. A healthy one has its rate
    at its second read; after a few more it is a counted problem, said once."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    url = await serving(aiohttp_server, lambda: web.Response(text=exposition(None, 0.9, rates=False)))  # a new read
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, url),))]), timeout_s=5.0)

    def said() -> list[logging.LogRecord]:
        return [record for record in caplog.records if "p-0" in record.getMessage()]

    try:
        await source.collect(time.time())
        await source.collect(time.time())  # its first read, and one more: a healthy exporter has a rate by now
        assert source.problems(KEY) == () and said() == []
        for _ in range(3):
            await source.collect(time.time())
        [problem] = source.problems(KEY)
        assert (problem.reason, problem.pod) == ("garbage", "p-0"), problem
        assert url in problem.detail and "still publishes no request rate" in problem.detail, problem.detail
        assert source.errors["garbage"] >= 1
        [line] = said()
        assert line.levelname == "WARNING" and "--load-window" in line.getMessage(), line.getMessage()
    finally:
        await source.close()


async def test_fixing_a_pods_url_ends_its_backoff(aiohttp_server: AiohttpServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A pod whose URL was wrong (here a 404) and is then corrected waited out the old URL's backoff (up to 60 s,
    `fresh: false`) because the streak was keyed by runtime and pod name only; it is keyed by URL too. Its
    recovery is said, as its failure was (the new URL's streak had none to end: nothing was said)."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    fixed, wrong = await answering_and_404(aiohttp_server, lambda: exposition("40", 0.5))  # 404: starts a streak
    discovery = StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, wrong),))])
    source = ScrapeSource(discovery, timeout_s=5.0)
    try:
        start = time.time()
        for step in range(3):  # a streak of three: the next try is well past the refresh below
            await source.collect(start + 20 * step)
        assert [problem.reason for problem in source.problems(KEY)] == ["http"]
        discovery.set_runtime(RuntimeInventory(KEY, (PodTarget("p-0", True, fixed),)))
        [snapshot] = await source.collect(start + 41)
        assert snapshot.pods[0].requests_per_second == 40.0, snapshot.pods[0]
        assert source.problems(KEY) == ()
        said = [r.getMessage() for r in caplog.records if f"{KEY}/p-0" in r.getMessage()]
        assert said[0].startswith(f"scrape of {KEY}/p-0 failed (http)"), said
        assert said[-1] == f"scrape of {KEY}/p-0 recovered", said
    finally:
        await source.close()


async def test_a_pod_created_again_under_its_name_does_not_inherit_the_old_ones_reading(
        aiohttp_server: AiohttpServer) -> None:
    """A pod deleted and created again under the same name (a StatefulSet-like controller, a hand-made pod), whose
    new exporter does not answer yet: the old pod's reading was held for it, and counted fresh until
    `max_staleness_s`, as the new pod's load."""
    answering, refused = await answering_and_404(aiohttp_server, lambda: exposition("77", 0.9))
    old = PodTarget("p-0", True, answering, created_at=1_000.0)
    discovery = StaticDiscovery([RuntimeInventory(KEY, (old,))])
    source = ScrapeSource(discovery, timeout_s=5.0)
    try:
        [first] = await source.collect(time.time())
        assert first.pods[0].requests_per_second == 77.0
        new = PodTarget("p-0", True, refused, created_at=2_000.0)
        discovery.set_runtime(RuntimeInventory(KEY, (new,)))
        [second] = await source.collect(time.time())
        pod = second.pods[0]
        assert pod.sampled_at is None and pod.requests_per_second is None, pod
        assert pod.created_at == 2_000.0
    finally:
        await source.close()


async def test_a_failing_pods_new_reason_is_said_as_its_first_was(aiohttp_server: AiohttpServer,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A pod failing for one reason (here its exporter answering 500) that goes on failing for another (here an
    answer that is no exposition): only the streak's first reason was logged, so a log that said `http` went on
    hiding what /debug showed (seen as a lost pod's refused scrapes turning into `other_pod` when its IP went to
    another pod). Each new reason is said once; the same reason again is not."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    answer: dict[str, Any] = {"status": 500, "text": "busy"}
    url = await serving(aiohttp_server, lambda: web.Response(status=answer["status"], text=answer["text"]))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, url),))]), timeout_s=5.0)
    try:
        start = time.time()
        await source.collect(start)
        await source.collect(start + 60)
        answer.update(status=200, text="<html>not metrics</html>")
        await source.collect(start + 120)
        await source.collect(start + 180)
        assert [problem.reason for problem in source.problems(KEY)] == ["parse"]
        said = [r.getMessage() for r in caplog.records if f"{KEY}/p-0" in r.getMessage()]
        assert [line.split(":")[0] for line in said] == [f"scrape of {KEY}/p-0 failed (http)",
                                                         f"scrape of {KEY}/p-0 failed (parse)"], said
    finally:
        await source.close()


async def test_a_garbled_answer_is_said_without_the_targets_files_password(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """A targets file may give a pod's URL with credentials (`https://user:password@host/metrics`); a failed
    scrape's line and /debug hide the password, and so must a garbled answer's."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    answer = {"text": exposition("40", 0.5)}
    url = await serving(aiohttp_server, lambda: web.Response(text=answer["text"]))
    with_password = url.replace("http://", "http://scraper:s3cret@")
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("nan-0", True, with_password),))]),
                          timeout_s=5.0)
    try:
        await source.collect(time.time())
        answer["text"] = exposition("NaN", 0.5)
        await source.collect(time.time())
        [problem] = source.problems(KEY)
        assert problem.detail.startswith(with_password.replace("s3cret", "***")), problem.detail
        assert "s3cret" not in caplog.text, caplog.text
    finally:
        await source.close()
