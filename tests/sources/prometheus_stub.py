"""A stand-in for Prometheus's HTTP query API that answers each PromQL query from a dict the test fills, for the
sequences a real Prometheus cannot be made to give on cue (a pod's series gone, then back older than held; a value
of 1e308 one refresh and 41 the next). Its answers have the real API's shape (`status`, `data.resultType`,
`data.result`); a query the dict lacks answers an empty vector, as Prometheus does for series that do not exist."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.prometheus import PrometheusSource
from tests.sources.static_discovery import StaticDiscovery

Answers = dict[str, list[dict[str, object]]]
"""Each query's vector: the `result` entries, `{"metric": {...}, "value": [time, "value"]}`."""


async def answering_prometheus(aiohttp_server: AiohttpServer, answers: Answers) -> str:
    """Serve `answers` (read at each query, so the test changes them between collections); the base URL."""

    async def query(request: web.Request) -> web.Response:
        result = answers.get(request.query["query"], [])
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    server = await aiohttp_server(app)
    return str(server.make_url(""))


def series_at(namespace: str, at: float) -> Callable[[str, float], dict[str, object]]:
    """A pod's series in `namespace` as a result entry stamped `at`: `series(pod, value)`."""

    def series(pod: str, value: float) -> dict[str, object]:
        return {"metric": {"namespace": namespace, "pod": pod}, "value": [at, repr(value)]}

    return series


@dataclass
class TwoPods:
    """A runtime of two pods, a-1 and a-2, read by a `PrometheusSource` from the stand-in: the test sets what each
    query answers (`answers`, `series`, the `freshness` and `rps` queries) between collections."""

    source: PrometheusSource
    answers: Answers
    series: Callable[[str, float], dict[str, object]]
    freshness: str
    rps: str

    def answer(self, stamp: float, rate: float) -> None:
        """Both pods sampled at `stamp`; a-1 at `rate` requests a second, a-2 at 10."""
        self.answers[self.freshness] = [self.series("a-1", stamp), self.series("a-2", stamp)]
        self.answers[self.rps] = [self.series("a-1", rate), self.series("a-2", 10.0)]


def two_pods(key: RuntimeKey) -> StaticDiscovery:
    return StaticDiscovery.of({(key.namespace, key.deployment): ["a-1", "a-2"]})


async def two_pods_answering(aiohttp_server: AiohttpServer, key: RuntimeKey, now: float,
                             sources: list[PrometheusSource]) -> TwoPods:
    """The runtime `key`'s two pods read from the stand-in, its series stamped `now` (the source is added to
    `sources`, which closes it)."""
    answers: Answers = {}
    source = PrometheusSource(two_pods(key), await answering_prometheus(aiohttp_server, answers))
    sources.append(source)
    freshness, _gpu, rps, *_ = source.queries
    return TwoPods(source, answers, series_at(key.namespace, now), freshness, rps)
