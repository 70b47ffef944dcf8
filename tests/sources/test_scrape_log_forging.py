"""A tenant's exporter cannot write lines of its own into the adapter's log, nor lines of any length. What it says
of itself reaches the log when its answer is refused: the pod it claims to run in (`modelmesh_exporter_pod_info`,
whose label values the format lets hold an escaped line break), and the text the library's parser could not read.
Written as they were, an escaped `\\n` ended the adapter's line and started one that read like the adapter's own
(a forged WARNING), and a 500 KB label value made a 500 KB line. They are quoted and cut short now, as the request
paths are (`tests/api/test_log_forging.py`).

Real exporter stand-ins on real sockets; what is checked is the log's lines and /debug's problem.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from exporter import names
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_scrape_garbage import exposition, serving

KEY = RuntimeKey("tenant-b", "modelmesh-serving-evil")
FORGED = "2026-12-05 11:00:00,000 WARNING autoscaler.api.auth: all clear"
LONGEST_LINE = 2_000
"""Far more than the adapter's own words in a refused scrape's line, far less than what the exporter sends."""


async def said_of_a_refused_answer(aiohttp_server: AiohttpServer, text: str, caplog: pytest.LogCaptureFixture,
                                   reason: str) -> str:
    """The log's line of the pod whose exporter answered `text`, after checking /debug's problem says the same."""
    return await said_of_a_failed_scrape(await serving(aiohttp_server, lambda: web.Response(text=text)), caplog,
                                         reason)


async def said_of_a_failed_scrape(url: str, caplog: pytest.LogCaptureFixture, reason: str) -> str:
    """The log's line of the pod whose exporter is at `url`, after checking /debug's problem says the same."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.scrape")
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("b-0", True, url, uid="mine"),))]),
                          timeout_s=5.0)
    try:
        await source.collect(time.time())
    finally:
        await source.close()
    [problem] = source.problems(KEY)
    assert problem.reason == reason, problem
    lines = [record.getMessage() for record in caplog.records if record.name.startswith("autoscaler")]
    [said] = [line for line in lines if "b-0" in line]
    assert problem.detail in said
    assert all("\n" not in line and "\r" not in line and "\x1b" not in line and len(line) < LONGEST_LINE
               for line in lines), lines
    return said


def naming(pod: str) -> str:
    """An exporter's answer that names another pod (another uid) `pod` of the scraped pod's namespace (which /debug
    names too, as the log does), as the format escapes it."""
    escaped = pod.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return exposition("40", 0.5) + f'{names.POD_INFO}{{namespace="{KEY.namespace}",pod="{escaped}",uid="other"}} 1\n'


async def test_a_line_break_in_the_pod_an_exporter_claims_stays_in_its_line(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    said = await said_of_a_refused_answer(aiohttp_server, naming(f"x\n{FORGED}"), caplog, "other_pod")
    assert f"answered for pod 'tenant-b/x\\n{FORGED} (uid other)', not tenant-b/b-0 (uid mine)" in said, said


async def test_a_huge_pod_an_exporter_claims_is_cut_short(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    said = await said_of_a_refused_answer(aiohttp_server, naming("n" * 500_000), caplog, "other_pod")
    assert "answered for pod 'tenant-b/nnnn" in said and "...' (500,021 characters), not tenant-b/b-0" in said, said


async def test_what_the_library_could_not_read_stays_in_its_line_and_is_cut_short(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """A text the fast reader gives up on (a tab escape), whose line the library refuses, quoting it whole."""
    bad = "x{a=" + "v" * 30_000 + f"\r{FORGED}" + "} 1"
    said = await said_of_a_refused_answer(aiohttp_server, exposition("40", 0.5) + 'y{a="\\t"} 1\n' + bad + "\n",
                                          caplog, "parse")
    assert "unparseable exposition: 'Invalid labels: a=vvv" in said and "characters)" in said, said


async def test_the_location_of_a_redirect_is_quoted_and_cut_short(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """An exporter that redirected to a new 3,000-character Location each time made a 30 KB line."""
    url = await serving(aiohttp_server, lambda: web.Response(status=302, headers={"Location": f"/m?{'x' * 3000}"}))
    said = await said_of_a_failed_scrape(url, caplog, "http")
    assert "redirected to '/m?xxx" in said and "...' (3,003 characters), not followed" in said, said


@contextlib.asynccontextmanager
async def redirecting_to(location: bytes) -> AsyncIterator[str]:
    """The /metrics URL of an exporter stand-in that answers a redirect to `location` as it is, bytes no HTTP
    server library would send (aiohttp refuses control characters in a header)."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/metrics"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("location", [f"ftp://evil/\x1b[2K{FORGED}", f"http://[evil\x1b[2K{FORGED}"])
async def test_a_redirect_is_quoted_and_counted_as_http(caplog: pytest.LogCaptureFixture, location: str) -> None:
    """Written as it came, the Location's terminal escapes reached the log (rewriting the line on a terminal),
    and the failure was counted as `connect`, although the exporter had answered."""
    async with redirecting_to(location.encode()) as url:
        said = await said_of_a_failed_scrape(url, caplog, "http")
    assert f"redirected to {location!r}, not followed" in said, said
