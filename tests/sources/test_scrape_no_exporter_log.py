"""What the log says when runtimes' Ready pods run no exporter sidecar: once a runtime, and one line for many.

The install guides add the sidecar to the runtimes to be scaled; a cluster with hundreds of runtimes, most of
them never scaled, had a warning a runtime at the adapter's first refresh (500 lines for 500 such runtimes). A
few are still named one a line; past `log_lists.NAMED` one line says how many, names the first ten and quotes
one pod's detail.
"""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery

NOW = 1_700_000_000.0


def without_sidecars(runtimes: int) -> StaticDiscovery:
    """`runtimes` runtimes of two Ready pods each that declare ports but not the exporter's."""
    return StaticDiscovery(
        RuntimeInventory(RuntimeKey("ml", f"modelmesh-serving-rt-{r:03d}"),
                         tuple(PodTarget(f"rt-{r:03d}-{p}", True, None, undeclared_exporter_port=9187)
                               for p in range(2)))
        for r in range(runtimes))


async def warnings_after_refreshes(caplog: pytest.LogCaptureFixture, runtimes: int, refreshes: int = 2) -> list[str]:
    source = ScrapeSource(without_sidecars(runtimes), clock=lambda: NOW)
    try:
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources"):
            for refresh in range(refreshes):
                await source.collect(NOW + 15.0 * refresh)
    finally:
        await source.close()
    return [r.getMessage() for r in caplog.records if "exporter sidecar" in r.getMessage()]


async def test_a_few_runtimes_without_the_sidecar_get_a_line_each_once(caplog: pytest.LogCaptureFixture) -> None:
    lines = await warnings_after_refreshes(caplog, 3)
    assert len(lines) == 3, lines
    assert lines[0].startswith("ml/modelmesh-serving-rt-000: 2 Ready pod(s) run no exporter sidecar"), lines[0]
    assert "9187" in lines[0], lines[0]


async def test_five_hundred_runtimes_without_the_sidecar_get_one_line(caplog: pytest.LogCaptureFixture) -> None:
    [line] = await warnings_after_refreshes(caplog, 500)
    assert line.startswith("500 runtimes have Ready pods that run no exporter sidecar (1000 pods)"), line
    assert "ml/modelmesh-serving-rt-000" in line and "ml/modelmesh-serving-rt-009" in line, line
    assert "ml/modelmesh-serving-rt-010" not in line and "and 490 more" in line, line
    assert "9187" in line and "fine for a runtime no HPA scales" in line, line
