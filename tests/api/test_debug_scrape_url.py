"""/debug shows each pod's scrape URL (`scrape_url`) for the scrape source, healthy or not: the scheme an exporter
is scraped over, chosen per pod by its port's name, was visible only in a failing scrape's detail. A pod the
source does not scrape (no exporter declared, no IP yet) shows null; under the Prometheus source, which scrapes
nothing itself, there is no such field. Real sources, the real API app, real sockets where nothing listens.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.app import build_api_app
from autoscaler.api.debug_document import explanation
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.scrape import ScrapeSource
from tests.api.builders import runtime_view
from tests.sources.static_discovery import StaticDiscovery
from tests.support.debug_answers import debug_body
from tests.support.ports import free_port

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
KEY = RuntimeKey("ml", "modelmesh-serving-triton")
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
T0 = 1_700_000_000.0


async def debug_pods(client: Client) -> list[dict[str, Any]]:
    async with client.get(DEBUG) as response:
        assert response.status == 200
        pods: list[dict[str, Any]] = (await response.json())["pods"]
        return pods


async def debug_after_refresh(aiohttp_client: ClientFactory, pods: tuple[PodTarget, ...]) -> dict[str, Any]:
    """The runtime's /debug document after one refresh of the real scrape source over `pods`."""
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, pods)]), timeout_s=2.0, clock=lambda: T0)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=lambda: T0, monotonic=lambda: T0)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    try:
        await refresher.refresh_once()
        async with client.get(DEBUG) as response:
            assert response.status == 200
            document: dict[str, Any] = await response.json()
            return document
    finally:
        await source.close()


async def shown_urls(aiohttp_client: ClientFactory, pods: tuple[PodTarget, ...]) -> dict[str, str | None]:
    """Each pod's `scrape_url` in /debug after one refresh of the real scrape source over `pods`."""
    return {pod["name"]: pod["scrape_url"] for pod in (await debug_after_refresh(aiohttp_client, pods))["pods"]}


async def test_every_pod_row_shows_its_scrape_url_or_null_where_it_is_not_scraped(
        aiohttp_client: ClientFactory) -> None:
    refused = f"https://127.0.0.1:{free_port()}/metrics"  # nothing listens: the pod fails, its URL still shown
    pods = (PodTarget("triton-0", ready=True, url=refused),
            PodTarget("triton-1", ready=True, url=None, undeclared_exporter_port=9187),  # no sidecar
            PodTarget("triton-2", ready=False, url=None))  # no IP yet
    shown = await shown_urls(aiohttp_client, pods)
    assert shown == {"triton-0": refused, "triton-1": None, "triton-2": None}


async def test_the_prometheus_source_shows_no_scrape_url(aiohttp_client: ClientFactory) -> None:
    """Prometheus scrapes the exporters, at URLs the adapter never learns (its own targets page has them): a
    null would read as "not scraped"."""
    discovery = StaticDiscovery.of({(KEY.namespace, KEY.deployment): ["triton-0"]})
    source = PrometheusSource(discovery, f"http://127.0.0.1:{free_port()}", timeout_s=2.0, clock=lambda: T0)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=lambda: T0, monotonic=lambda: T0)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    try:
        await refresher.refresh_once()
        pods = await debug_pods(client)
    finally:
        await source.close()
    assert [pod["name"] for pod in pods] == ["triton-0"]
    assert "scrape_url" not in pods[0], pods[0]


_url = st.none() | st.text(st.characters(codec="utf-8"), max_size=60)


@given(st.lists(_url, min_size=3, max_size=3), st.booleans())
def test_the_scrape_urls_are_written_as_the_explanation_says(urls: list[str | None], drop_one: bool) -> None:
    """However the record is made, the served bytes are `json.dumps(explanation(...))`; a pod the source no longer
    lists (a newer inventory than the view's) shows null."""
    view = runtime_view()
    by_pod = {pod.name: url for pod, url in zip(view.pods, urls, strict=True)}
    if drop_one:
        del by_pod[view.pods[0].name]
    assert debug_body(view, urls=by_pod) == json.dumps(explanation(view, urls=by_pod)).encode()
    shown = [pod["scrape_url"] for pod in explanation(view, urls=by_pod)["pods"]]
    assert shown == [None if drop_one else urls[0], *urls[1:]]
    assert "scrape_url" not in explanation(view)["pods"][0]


async def test_a_password_in_a_targets_files_url_is_not_shown(aiohttp_client: ClientFactory) -> None:
    """A targets file may give an exporter behind basic auth as `https://user:password@host/metrics`: /debug
    shows the user and `***`, as the logs do, not the password."""
    port = free_port()
    pods = (PodTarget("triton-0", ready=True, url=f"https://scraper:s3cret@127.0.0.1:{port}/metrics"),)
    shown = await shown_urls(aiohttp_client, pods)
    assert shown == {"triton-0": f"https://scraper:***@127.0.0.1:{port}/metrics"}


async def test_a_password_in_a_targets_files_url_is_not_in_a_failed_scrapes_detail(
        aiohttp_client: ClientFactory) -> None:
    """The scrape's failure (nothing listens there) quoted the URL as written: /debug's problem detail, and the
    WARNING it is logged with, carried the password."""
    url = f"http://scraper:s3cret@127.0.0.1:{free_port()}/metrics"
    document = await debug_after_refresh(aiohttp_client, (PodTarget("triton-0", ready=True, url=url),))
    [problem] = document["source"]["problems"]
    assert "scraper:***@127.0.0.1" in problem["detail"], problem
    assert "s3cret" not in json.dumps(document), problem
