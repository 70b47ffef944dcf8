"""A tenant's pod answers the scrape with whatever it likes: any pod of a discovered runtime that declares the
exporter port. One pod answering a single line of thousands of labels held every runtime's refresh (the duplicate-
label check was quadratic in a line's labels, in the event loop: 503s for every tenant, /livez failing); any text
the fast reader does not know went to prometheus_client's parser, about a second of the loop per MiB, so 15 such
pods used up a refresh. Both are now refused as a failed scrape that says which limit they were over, and the
other tenants' pods are read as always.

Real exporter stand-ins on real sockets; the refusal is what the log and /debug say.
"""

from __future__ import annotations

import logging
import time

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.exporter_text_limits import FALLBACK_MAX_BYTES, MAX_LABELS_PER_LINE
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_scrape_garbage import exposition, serving

GOOD, HOSTILE = RuntimeKey("tenant-a", "modelmesh-serving-good"), RuntimeKey("tenant-b", "modelmesh-serving-evil")


async def refused_beside_a_good_tenant(aiohttp_server: AiohttpServer, hostile_text: str,
                                       caplog: pytest.LogCaptureFixture) -> str:
    """What the log says of the hostile pod, after the good tenant's pod was read as always in the same refresh."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    good = await serving(aiohttp_server, lambda: web.Response(text=exposition("40", 0.5)))
    hostile = await serving(aiohttp_server, lambda: web.Response(text=hostile_text))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(GOOD, (PodTarget("a-0", True, good),)),
                                           RuntimeInventory(HOSTILE, (PodTarget("b-0", True, hostile),))]),
                          timeout_s=5.0)
    try:
        snapshots = {snapshot.key: snapshot for snapshot in await source.collect(time.time())}
    finally:
        await source.close()
    assert snapshots[GOOD].pods[0].requests_per_second == 40.0
    assert snapshots[HOSTILE].pods[0].requests_per_second is None  # nothing believed of it
    [problem] = source.problems(HOSTILE)
    assert (problem.reason, problem.pod) == ("parse", "b-0"), problem
    [said] = [record.getMessage() for record in caplog.records if "b-0" in record.getMessage()]
    assert problem.detail in said
    return said


async def test_a_line_of_thousands_of_labels_is_refused_saying_the_limit(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    labels = ",".join(f'l{number}=""' for number in range(10_000))
    said = await refused_beside_a_good_tenant(aiohttp_server, exposition("40", 0.5) + f"z{{{labels}}} 1\n", caplog)
    assert f"has 10,000 labels, over the {MAX_LABELS_PER_LINE} a line" in said, said
    assert "MAX_LABELS_PER_LINE" in said


async def test_a_large_answer_not_in_the_exporters_shape_is_refused_saying_the_limit(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """A tab escape, which the exporter never writes, sends the text to the library's parser: 200 KB of it."""
    padding = "".join(f"other_series_{number} 1\n" for number in range(10_000))
    text = exposition("40", 0.5) + 'x{a="\\t"} 1\n' + padding
    assert len(text) > 3 * FALLBACK_MAX_BYTES
    said = await refused_beside_a_good_tenant(aiohttp_server, text, caplog)
    assert f"{len(text):,} bytes not in the exporter's own shape, over the 64 KiB" in said, said
    assert "FALLBACK_MAX_BYTES" in said
