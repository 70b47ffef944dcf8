"""One pod's exporter answers a finite value no real pod reaches (1e308 requests a second, a queue delay of
eleven days, a GPU busy of 50: a percent sent as a ratio). It was read as a real load: the runtime scaled to its
maximum, silently (no log line, /debug showing the pod fresh with no problem), and the smoothing held it there
for an hour after the value was sane again. It is refused as a NaN is: the pod's last good sample is held, the
pod's problem is in /debug (`garbage`), and one WARNING line names the pod, the series, the value and the ceiling.

A real exporter stand-in on a real socket, whose answer the test changes between refreshes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from exporter import names
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_scrape_garbage import serving

KEY = RuntimeKey("ml", "modelmesh-serving-huge")

GOOD = {names.REQUESTS_PER_SECOND: "10", names.QUEUE_DELAY_SECONDS: "0.01", names.CACHE_USED_RATIO: "0.5",
        names.LRU_AGE_SECONDS: "600", names.MODELS_LOADED: "12", names.CACHE_MISSES_PER_SECOND: "0.1"}


def exposition(values: dict[str, str], gpu: str = "0.5") -> str:
    """An exporter's answer, its collections half a second old."""
    now = time.time()
    lines = [f'{names.GPU_BUSY_RATIO}{{gpu="0",uuid="GPU-0"}} {gpu}',
             f'{names.COLLECTOR_SUCCESS}{{collector="modelmesh"}} 1', f'{names.COLLECTOR_SUCCESS}{{collector="gpu"}} 1',
             f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="gpu"}} {now - 0.5}',
             f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}} {now - 0.5}',
             f"{names.EXPORTER_TIME} {now}", *(f"{name} {value}" for name, value in values.items())]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("series", "value", "said"), [
    (names.REQUESTS_PER_SECOND, "1e308", "modelmesh_pod_requests_per_second 1e+308 is above 1e+06"),
    (names.REQUESTS_PER_SECOND, "1e12", "modelmesh_pod_requests_per_second 1e+12 is above 1e+06"),
    (names.QUEUE_DELAY_SECONDS, "1e6", "modelmesh_pod_queue_delay_seconds 1e+06 is above 3600"),
    (names.CACHE_USED_RATIO, "95", "modelmesh_pod_cache_used_ratio 95 is above 2"),
    (names.GPU_BUSY_RATIO, "50", "modelmesh_pod_gpu_busy_ratio 50 is above 1.1"),
])
async def test_a_value_no_pod_reaches_holds_the_last_good_sample_and_says_so(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture, series: str, value: str, said: str) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    answer = {"text": exposition(GOOD)}
    url = await serving(aiohttp_server, lambda: web.Response(text=answer["text"]))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("huge-0", True, url),))]), timeout_s=5.0)
    try:
        [good] = await source.collect(time.time())
        assert (good.pods[0].requests_per_second, good.pods[0].gpu_busy) == (10.0, 0.5)
        if series == names.GPU_BUSY_RATIO:
            answer["text"] = exposition(GOOD, gpu=value)
        else:
            answer["text"] = exposition({**GOOD, series: value})
        [held] = await source.collect(time.time())
        await source.collect(time.time())  # still garbage: said once, not at every refresh
        pod, before = held.pods[0], good.pods[0]
        if series == names.GPU_BUSY_RATIO:
            assert pod == before, pod  # the last good sample, stamps and all: it turns stale, never busy
        else:  # the load signals held with their stamp (they turn stale, never huge); the fresh GPU busy kept
            assert replace(pod, gpu_sampled_at=before.gpu_sampled_at) == before, pod
        [problem] = source.problems(KEY)
        assert (problem.reason, problem.pod) == ("garbage", "huge-0"), problem
        assert said in problem.detail, problem.detail
        assert "no real pod reaches" in problem.detail, problem.detail
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        [line] = warnings
        assert f"{KEY}/huge-0" in line and said in line, line
        answer["text"] = exposition(GOOD)
        [again] = await source.collect(time.time())
        assert again.pods[0].requests_per_second == 10.0
        assert source.problems(KEY) == ()
        assert f"scrape of {KEY}/huge-0 recovered" in [r.getMessage() for r in caplog.records]
    finally:
        await source.close()


async def test_a_high_but_real_value_is_used(aiohttp_server: AiohttpServer) -> None:
    """The ceilings are far above a hot pod: 5,000 requests a second, a 10-minute queue, a GPU at 1.05 (read as
    1.0) and a cache 1.2 times over are readings, not garbage."""
    hot = {**GOOD, names.REQUESTS_PER_SECOND: "5000", names.QUEUE_DELAY_SECONDS: "600",
           names.CACHE_USED_RATIO: "1.2"}
    url = await serving(aiohttp_server, lambda: web.Response(text=exposition(hot, gpu="1.05")))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("hot-0", True, url),))]), timeout_s=5.0)
    try:
        [snapshot] = await source.collect(time.time())
        pod = snapshot.pods[0]
        assert (pod.requests_per_second, pod.queue_delay_s, pod.cache_used_ratio, pod.gpu_busy) == (
            5000.0, 600.0, 1.2, 1.0)
        assert source.problems(KEY) == ()
    finally:
        await source.close()
