"""The promise of `exporter.rendered_metrics`: whatever the readings, scrapes and formats in between, each body is
byte for byte the whole registry's exposition at that scrape (gzipped: one gzip stream of it), the steady part
rendered once per reading and format (in a worker thread)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Iterable

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from exporter.rendered_metrics import GZIP_ON_LOOP_BYTES, MAX_FORMATS, RenderedMetrics, Steady

ACCEPTS = (  # five formats: one more than are kept
"", "application/openmetrics-text; version=1.0.0", "text/plain; version=0.0.4",
           "application/openmetrics-text; version=1.0.0; escaping=values", "text/plain;version=1.0.0",
           "application/openmetrics-text; version=0.0.1", "application/openmetrics-text")


class Models(Collector):
    """A stand-in for ModelMesh's collector: families made from its last reading alone."""

    def __init__(self) -> None:
        self.reading: dict[str, float] = {}
        self.reads = 0

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("served_at", "Last served.", labels=["model_id"])
        for model, at in self.reading.items():
            family.add_metric([model], at)
        if self.reading:
            yield GaugeMetricFamily("models", "How many.", value=len(self.reading))
            yield family


class Clock(Collector):
    """A stand-in for the self-metrics: a value that changes between scrapes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.value = 0.0

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(self.name, "Now.", value=self.value)


step = st.one_of(
    st.tuples(st.just("read"), st.dictionaries(st.text(min_size=1, max_size=8), st.floats(0, 2e9), max_size=20)),
    st.tuples(st.just("tick"), st.floats(allow_nan=False)),
    st.tuples(st.just("scrape"), st.tuples(st.sampled_from(ACCEPTS), st.booleans())),
)


@given(st.lists(step, max_size=30))
def test_every_body_is_the_whole_registry_rendered_at_that_scrape(steps: list[tuple[str, object]]) -> None:
    models, clock, pod = Models(), Clock("clock"), Clock("pod_info")
    registry = CollectorRegistry(auto_describe=False)
    for collector in (models, clock, pod):
        registry.register(collector)
    rendered = RenderedMetrics([Steady(models, lambda: models.reads)], [clock, pod])
    asyncio.run(scrape_through(steps, models, clock, pod, registry, rendered))


async def scrape_through(steps: list[tuple[str, object]], models: Models, clock: Clock, pod: Clock,
                         registry: CollectorRegistry, rendered: RenderedMetrics) -> None:
    renders_due = 0
    formats_since_read: set[str] = set()
    asked: set[str] = set()
    for kind, value in steps:
        if kind == "read":
            assert isinstance(value, dict)
            models.reading = dict(value)  # a new reading is a new object
            models.reads += 1
            formats_since_read.clear()
        elif kind == "tick":
            assert isinstance(value, float)
            clock.value = pod.value = value
        else:
            assert isinstance(value, tuple)
            accept, gzipped = value
            encoder, content_type = choose_encoder(accept)
            body = await rendered.body(encoder, content_type, gzipped)
            asked.add(content_type)
            if content_type not in formats_since_read:
                renders_due += 1
                formats_since_read.add(content_type)
            if gzipped:
                assert body[:2] == b"\x1f\x8b"
                decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member, nothing after it
                body_read = decompressor.decompress(body)
                assert decompressor.eof and not decompressor.unused_data
                assert body_read == gzip.decompress(body)
                body = body_read
            assert body == encoder(registry)
    if len(asked) <= MAX_FORMATS:  # more formats than are kept: one may be rendered again, as before
        assert rendered.renders == renders_due


def test_a_head_too_large_to_compress_on_the_loop_is_compressed_once_in_a_thread() -> None:
    """A head over `GZIP_ON_LOOP_BYTES` (some 600 models) is compressed in a worker thread: the gzip stream is the
    same whole registry, scrape after scrape, and ends where it should."""
    models, clock = Models(), Clock("clock")
    registry = CollectorRegistry(auto_describe=False)
    for collector in (models, clock):
        registry.register(collector)
    models.reading = {f"model-{index:05d}": 1.7e9 + index for index in range(5_000)}
    models.reads = 1
    rendered = RenderedMetrics([Steady(models, lambda: models.reads)], [clock])
    encoder, content_type = choose_encoder("application/openmetrics-text; version=1.0.0")
    assert len(encoder(registry)) > GZIP_ON_LOOP_BYTES

    async def scrapes() -> list[bool]:
        same = []
        for tick in range(3):
            clock.value = float(tick)
            same.append(gzip.decompress(await rendered.body(encoder, content_type, gzip=True)) == encoder(registry))
        return same

    assert asyncio.run(scrapes()) == [True] * 3
    assert rendered.renders == 1
