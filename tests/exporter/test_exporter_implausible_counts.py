"""A ModelMesh count that jumps to an absurd value is refused by the exporter, not published as a huge rate.

The adapter refuses a signal above its ceiling (`exporter.signal_ceilings`), but Prometheus, Grafana and the
alert rules read the exporter's series directly: a `modelmesh_invoke_model_milliseconds_count` read once as
1e308 (a garbled exposition, a bug) showed there as 1e308 requests in `modelmesh_pod_requests_total` for good and
a rate of some 1e307 requests a second for a whole load window. The real exporter runs here against a ModelMesh
metrics port whose count the test sets, and the test reads what Prometheus would scrape.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter import names
from exporter.signal_ceilings import CEILINGS
from tests.exporter.modelmesh_wire import ModelMeshContainer, _Series, served_in_a_thread
from tests.support.processes import free_port, http_get, poll, running

ABSURD = 1e308
PARSE_ERRORS = f'{names.SCRAPE_ERRORS_TOTAL}{{collector="modelmesh",reason="parse"}}'
SUCCESS = f'{names.COLLECTOR_SUCCESS}{{collector="modelmesh"}}'


@dataclass(frozen=True)
class Garble:
    """One ModelMesh count set to `ABSURD`: which, and what the exporter's refusal names."""

    series: Callable[[ModelMeshContainer], _Series]
    attribute: str
    """`count` or `total_ms` of the series."""
    modelmesh_sample: str
    published: str
    """The exporter's series that would have shown it."""
    signal: str
    """Its `CEILINGS` key."""


GARBLES = {
    "requests": Garble(lambda mm: mm.invoke.series[("ModelInfer", "OK")], "count",
                       f"{names.MM_INVOKE_MODEL_MS}_count", names.REQUESTS_PER_SECOND, "requests_per_second"),
    "cache misses": Garble(lambda mm: mm.cache_miss.series[()], "count", f"{names.MM_CACHE_MISS_MS}_count",
                           names.CACHE_MISSES_PER_SECOND, "cache_misses_per_second"),
    "queue delay": Garble(lambda mm: mm.queue.series[()], "total_ms", f"{names.MM_QUEUE_DELAY_MS}_sum",
                          names.QUEUE_DELAY_SECONDS, "queue_delay_s"),
}


def published(body: str) -> dict[str, float]:
    """A /metrics body's samples, by name and labels as written."""
    values: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        values[name] = float(value)
    return values


@contextmanager
def exporter_of(container: ModelMeshContainer, log: Path) -> Iterator[Callable[[], dict[str, float]]]:
    """The real exporter reading `container` every 0.1 s; a function that scrapes it."""
    port = free_port()
    with served_in_a_thread(container) as modelmesh_url, running(
        ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url", modelmesh_url,
         "--modelmesh-interval", "0.1", "--load-window", "1"],
        f"http://127.0.0.1:{port}/healthz", log,
    ):
        yield lambda: published(http_get(f"http://127.0.0.1:{port}/metrics")[1])


def scraped_until(scrape: Callable[[], dict[str, float]], requests_total: float) -> dict[str, float]:
    """What the exporter serves once its `modelmesh_pod_requests_total` is `requests_total`; an AssertionError with
    the last values served when it does not come within 30 s."""
    seen: list[dict[str, float]] = []

    def reached() -> dict[str, float] | None:
        seen.append(scrape())
        return seen[-1] if seen[-1].get(names.REQUESTS_TOTAL) == requests_total else None

    try:
        return poll(reached, timeout=30)
    except AssertionError:
        raise AssertionError(f"{names.REQUESTS_TOTAL} never {requests_total:g}; last served {seen[-1]}") from None


@pytest.mark.parametrize("garble", GARBLES.values(), ids=GARBLES.keys())
def test_an_absurd_count_is_refused_with_one_warning_and_the_last_good_values_stay(
        garble: Garble, tmp_path: Path) -> None:
    container = ModelMeshContainer(lambda: 1_800_000_000.0)
    container.publish(models=1, lru_time_s=None)
    log = tmp_path / "exporter.log"
    with exporter_of(container, log) as scrape:
        poll(lambda: names.REQUESTS_TOTAL in scrape(), timeout=30)  # the first read: the baseline
        container.serve(100, queue_ms=40.0)
        container.cache_miss.series[()].observe(2000.0, 3)
        poll(lambda: scrape().get(names.REQUESTS_TOTAL) == 100, timeout=30)

        series = garble.series(container)
        real = getattr(series, garble.attribute)
        setattr(series, garble.attribute, ABSURD)

        def read_or_refused() -> dict[str, float] | None:
            """Two garbled reads refused (the count stays at the absurd value: nothing tells what the pod
            served, so no read of it is taken, not even one counting on from it as 0 new requests), or the absurd
            count taken (the spike a dashboard would show)."""
            values = scrape()
            taken = (values[names.REQUESTS_TOTAL] != 100
                     or values.get(garble.published, 0.0) > CEILINGS[garble.signal].limit)
            refused = values.get(PARSE_ERRORS, 0.0) >= 2 and values[SUCCESS] == 0.0
            return values if taken or refused else None

        refused = poll(read_or_refused, timeout=30)
        assert refused[names.REQUESTS_TOTAL] == 100, refused  # the last good values stay
        assert refused.get(garble.published, 0.0) <= CEILINGS[garble.signal].limit, refused

        setattr(series, garble.attribute, real)  # one garbled stretch of reads, then ModelMesh's true count again
        container.serve(50, queue_ms=40.0)
        seen: list[dict[str, float]] = []

        def healed() -> dict[str, float] | None:
            seen.append(scrape())
            return seen[-1] if seen[-1].get(names.REQUESTS_TOTAL) == 150 else None

        poll(healed, timeout=30, interval=0.05)

    for values in seen:  # nothing of the garbled reads came through after them either
        for name, signal in ((names.REQUESTS_PER_SECOND, "requests_per_second"),
                             (names.CACHE_MISSES_PER_SECOND, "cache_misses_per_second"),
                             (names.QUEUE_DELAY_SECONDS, "queue_delay_s")):
            assert values.get(name, 0.0) <= CEILINGS[signal].limit, (name, values)
    text = log.read_text()
    warnings = [line for line in text.splitlines() if "WARNING" in line and garble.modelmesh_sample in line]
    assert len(warnings) == 1, text  # said once for the stretch, not at every read
    warning = warnings[0]
    assert "1e+308" in warning, warning  # the value read
    # 1e308 in 0.1 s is past a float's range: the rate is worded, never "inf" (the reader's question: how much?)
    assert not re.search(r"\b(inf|nan)\b", warning), warning
    assert garble.published in warning and f"{CEILINGS[garble.signal].limit:g}" in warning, warning
    assert "keeping last good values" in warning, warning
    assert "back below what the refused read had (a garbled read, not a jump; 1 series)" in text, text
    assert seen[-1][SUCCESS] == 1.0, seen[-1]  # its true count back, read as such: not refused, no restart
    assert "restarted" not in text, text
    assert "Traceback" not in text, text


def test_a_count_that_jumped_and_stays_costs_one_read_and_counts_on_from_there(tmp_path: Path) -> None:
    """A ModelMesh bug adds 1e12 to a request count once, then counts on normally: compared with the last accepted
    reading every later one rose as far, and was refused for ever (the pod's load stale, the adapter holding the
    runtime). The jumped reading is refused, and so is each after it until the count moves on from the jumped
    value (before that, nothing tells a jump from a garble that stays); from then on the reads count on from it."""
    container = ModelMeshContainer(lambda: 1_800_000_000.0)
    container.publish(models=1, lru_time_s=None)
    log = tmp_path / "exporter.log"
    with exporter_of(container, log) as scrape:
        poll(lambda: names.REQUESTS_TOTAL in scrape(), timeout=30)
        container.serve(100, queue_ms=40.0)
        poll(lambda: scrape().get(names.REQUESTS_TOTAL) == 100, timeout=30)

        container.invoke.series[("ModelInfer", "OK")].count += 1e12  # the bug, once
        poll(lambda: scrape().get(PARSE_ERRORS, 0.0) >= 1, timeout=30)
        container.serve(50, queue_ms=40.0)  # ModelMesh counts on from its jumped count
        counted_on = scraped_until(scrape, requests_total=150)
        assert counted_on[SUCCESS] == 1.0, counted_on
        container.serve(30, queue_ms=40.0)
        later = scraped_until(scrape, requests_total=180)
        assert 0 < later[names.REQUESTS_PER_SECOND] <= CEILINGS["requests_per_second"].limit, later
        assert later[SUCCESS] == 1.0, later

    text = log.read_text()
    assert sum("WARNING" in line and "1e+12" in line for line in text.splitlines()) == 1, text
    assert "counting on from the refused read" in text, text
    assert "Traceback" not in text, text
