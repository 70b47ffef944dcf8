"""A stand-in for Prometheus's HTTP query API that answers each PromQL query from a dict the test fills, for the
sequences a real Prometheus cannot be made to give on cue (a pod's series gone, then back older than held; a value
of 1e308 one refresh and 41 the next). Its answers have the real API's shape (`status`, `data.resultType`,
`data.result`); a query the dict lacks answers an empty vector, as Prometheus does for series that do not exist."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from pytest_aiohttp import AiohttpServer

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
