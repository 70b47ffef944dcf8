"""What the sources read of the models each pod served recently (`PodSample.recent_models`).

The exporter publishes `modelmesh_pod_model_last_served_timestamp_seconds{model_id}` per model a pod served
recently, on its own clock; the refresh's snapshots must carry them per pod on the adapter's clock (the clock of
`sampled_at`), with None for a pod whose exporter does not publish the series (the need term drops out) and {}
for one that publishes it but served nothing. Exporters answer over real HTTP here (one local server, a path per
pod), the scrape source reading them as in a cluster.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from autoscaler.model import PodSample, RuntimeKey
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.exposition import ExpositionError, read_exporter_text
from autoscaler.sources.scrape import ScrapeSource
from bench.fake_exporter import exporter_text
from exporter import names
from tests.sources.static_discovery import StaticDiscovery

RUNTIME = RuntimeKey("team-a", "modelmesh-serving-triton")
NOW = 2_000_000_000.0
"""The adapter's clock, frozen: every scrape is sent and read at this time."""

Answer = Callable[[str], str]
"""What the exporter of the named pod answers, as text."""
Refresh = Callable[[], Awaitable[dict[str, PodSample]]]


def exporter(models: Mapping[str, float] | None, *, skew_s: float = 0.0, pod: int = 1) -> str:
    """An exporter whose clock reads `skew_s` off the adapter's, whose collector succeeded 2 s ago (its clock), and
    which served `models` at the given times (its clock)."""
    clock = NOW + skew_s
    return exporter_text(pod, gpus=1, modelmesh_stamp=clock - 2, gpu_stamp=clock - 2, clock=clock,
                         models=models).decode()


@contextlib.asynccontextmanager
async def scrape(answers: dict[str, Answer | str]) -> AsyncIterator[Refresh]:
    """A scrape source over one runtime whose pods (the keys) are served by one local HTTP server; yields a
    refresh that returns the runtime's pods by name."""

    async def handler(request: web.Request) -> web.Response:
        answer = answers[request.match_info["pod"]]
        text = answer if isinstance(answer, str) else answer(request.match_info["pod"])
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{pod}/metrics", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        discovery = StaticDiscovery([RuntimeInventory(RUNTIME, tuple(
            PodTarget(name, ready=True, url=str(server.make_url(f"/{name}/metrics"))) for name in answers))])
        source = ScrapeSource(discovery, clock=lambda: NOW)

        async def refresh() -> dict[str, PodSample]:
            (snapshot,) = await source.collect(NOW)
            return {pod.name: pod for pod in snapshot.pods}

        try:
            yield refresh
        finally:
            await source.close()


async def refresh_once(answers: dict[str, Answer | str]) -> dict[str, PodSample]:
    async with scrape(answers) as refresh:
        return await refresh()


async def test_each_pod_carries_the_models_it_served_on_the_adapters_clock() -> None:
    pods = await refresh_once({
        "busy": exporter({"mnist": NOW - 30, "bert": NOW - 400}),
        "idle": exporter({}),  # reports per-model use, served nothing recently
        "no-per-model-metrics": exporter(None),
    })

    assert pods["busy"].recent_models == {"mnist": NOW - 30, "bert": NOW - 400}
    assert pods["idle"].recent_models == {}
    assert pods["no-per-model-metrics"].recent_models is None
    # The pod's other signals are read as ever.
    assert pods["busy"].sampled_at == NOW - 2 and pods["busy"].requests_per_second == 1.0
    assert pods["no-per-model-metrics"].sampled_at == NOW - 2


async def test_model_ids_the_format_escapes_arrive_as_the_exporter_named_them() -> None:
    ids = ['say "hi"', "back\\slash", "two\nlines", "modèle-ü-模型"]
    pods = await refresh_once({"pod": exporter(dict.fromkeys(ids, NOW - 10))})

    assert pods["pod"].recent_models == dict.fromkeys(ids, NOW - 10)


async def test_a_node_clock_off_moves_the_served_times_as_it_moves_the_freshness() -> None:
    """The nodes' clocks read 120 s behind and 300 s ahead: a model served 30 s ago by the node's clock reads
    30 s ago on the adapter's, not 150 s (the term would forget it) nor -270 s (served in the future)."""
    pods = await refresh_once({
        "behind": exporter({"mnist": NOW - 120 - 30}, skew_s=-120),
        "ahead": exporter({"mnist": NOW + 300 - 30, "bert": NOW + 300 + 5}, skew_s=300),
    })

    assert pods["behind"].recent_models == {"mnist": NOW - 30}
    assert pods["behind"].sampled_at == NOW - 2
    # No later than the pod's own freshness: a time past the exporter's last read is not one it saw.
    assert pods["ahead"].recent_models == {"mnist": NOW - 30, "bert": NOW - 2}
    assert pods["ahead"].sampled_at == NOW - 2


async def test_a_garbled_time_drops_that_model_and_nothing_else() -> None:
    garbled = {"good": NOW - 30, "nan": math.nan, "negative": -5.0, "infinite": math.inf}
    pods = await refresh_once({"pod": exporter(garbled), "all-garbled": exporter({"nan": math.nan})})

    pod = pods["pod"]
    assert pod.recent_models == {"good": NOW - 30}
    assert (pod.sampled_at, pod.requests_per_second, pod.gpu_busy) == (NOW - 2, 1.0, 0.1)
    assert aggregate([pod], RuntimePolicy(), NOW).n == 1  # the pod still counts, fresh
    # Nothing valid at all is not "served nothing" (which would make the pod the cheapest to remove).
    assert pods["all-garbled"].recent_models is None
    assert pods["all-garbled"].requests_per_second == 1.0


async def test_a_garbled_body_keeps_the_last_good_sample_with_its_models() -> None:
    answers: dict[str, Answer | str] = {"pod": exporter({"mnist": NOW - 30})}
    async with scrape(answers) as refresh:
        good = await refresh()
        answers["pod"] = exporter({"mnist": NOW - 1})[:-40]  # cut off mid-line, no final newline
        held = await refresh()

    assert held["pod"] == good["pod"]
    assert held["pod"].recent_models == {"mnist": NOW - 30}


def test_the_model_series_is_not_mistaken_for_the_exporter_itself() -> None:
    """A response with only model series is not our exporter's (no freshness, no signals)."""
    text = f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{{names.MODEL_ID_LABEL}="mnist"}} {NOW - 30}\n'
    with pytest.raises(ExpositionError):
        read_exporter_text(text, "pod", True, NOW)
