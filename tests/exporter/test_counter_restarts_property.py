"""Whatever a ModelMesh container does between the exporter's reads (serves, restarts, publishes its instance record
late) and whatever reaches the exporter (whole bodies, bodies cut down to the instance gauges, bodies missing some
series), `modelmesh_pod_requests_total` never goes down and never counts a request twice: it stays at most the
requests served since the exporter's first read.

A body without counter series, with per-model metrics on, was read as a restart: the old counts were forgotten, and
the next whole body counted ModelMesh's whole history again. `test_modelmesh_lifecycle` shows that case over HTTP.

The exporter's first read is a whole body here: a first read cut down to the instance gauges, with per-model metrics
on, leaves nothing to count from, and the next read counts what ModelMesh served before the exporter started
(`exporter.counters`; with per-model metrics off the unlabelled histograms make that read a new baseline).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.modelmesh_text import SAMPLES_READ, ScrapeFailure
from tests.exporter.modelmesh_wire import ModelMeshContainer
from tests.support.clock import SteppedClock

MODELS = ("model-a", "model-b", "model-c")
CODES = ("OK", "NOT_FOUND")
INTERVAL_S = 5.0
START = 1_800_000_000.0


@dataclass(frozen=True)
class Step:
    """What happens in ModelMesh before one read, and what of its answer reaches the exporter."""

    served: tuple[tuple[int, int, int], ...]
    """(model, code, requests) served by the container since the read before."""
    restart: bool
    """The container restarted before serving those: a new JVM, its counters from 0."""
    publish: bool
    """The (new) container has published its instance record by this read."""
    body: str
    """`whole`, `cut` (the instance gauges alone), `missing` (the lines of `dropped` left out) or `down` (no read)."""
    dropped: int
    """Which model's series (with per-model metrics on), or which code's (off), a `missing` body lacks."""


STEP = st.builds(
    Step,
    served=st.lists(st.tuples(st.integers(0, len(MODELS) - 1), st.integers(0, len(CODES) - 1),
                              st.integers(1, 60)), max_size=3).map(tuple),
    restart=st.booleans(),
    publish=st.booleans(),
    body=st.sampled_from(["whole", "whole", "cut", "missing", "down"]),
    dropped=st.integers(0, len(MODELS) - 1),
)


def answered(container: ModelMeshContainer, step: Step) -> str:
    """The body that reaches the exporter for `step`, as ModelMesh answers the exporter's query."""
    text = container.render(frozenset(SAMPLES_READ))
    lines = text.splitlines(keepends=True)
    if step.body == "cut":
        return "".join(line for line in lines if "modelmesh_instance" in line)
    if step.body == "missing":
        gone = f'"{MODELS[step.dropped]}"' if container.per_model else f'code="{CODES[step.dropped % len(CODES)]}"'
        return "".join(line for line in lines if gone not in line)
    return text


def requests_total(collector: ModelMeshCollector) -> float | None:
    """`modelmesh_pod_requests_total` as the exporter serves it (None before its first good read)."""
    for family in collector.collect():
        for sample in family.samples:
            if sample.name == names.REQUESTS_TOTAL:
                return sample.value
    return None


@settings(max_examples=300, deadline=None)
@given(per_model=st.booleans(), before=st.integers(0, 100_000),
       steps=st.lists(STEP, min_size=1, max_size=30))
def test_requests_total_never_goes_down_and_never_counts_a_request_twice(
    per_model: bool, before: int, steps: list[Step],
) -> None:
    clock = SteppedClock(START)
    container = ModelMeshContainer(clock, per_model=per_model)
    container.publish(models=len(MODELS), lru_time_s=START - 100.0)
    container.serve(float(before), model=MODELS[0])  # before the exporter started: not its to count
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:2112/metrics", clock=clock,
                                   wall_clock=clock)
    served = 0.0  # since the exporter's first good read
    published: float | None = None
    for index, step in enumerate(steps):
        clock.advance(INTERVAL_S)
        if step.restart:
            container.restart()
        if step.publish or index == 0:
            container.publish(models=len(MODELS), lru_time_s=clock() - 1.0)
        for model, code, requests in step.served:
            container.serve(float(requests), model=MODELS[model], code=CODES[code])
            served += requests if published is not None else 0.0
        if step.body == "down":
            continue
        body = answered(container, step) if published is not None else container.render(frozenset(SAMPLES_READ))
        with contextlib.suppress(ScrapeFailure):  # refused: nothing changes
            collector.ingest(body, clock())
        total = requests_total(collector)
        assert total is not None or published is None
        if total is None:
            continue
        if published is None:
            assert total == 0.0, "the first read is the baseline"
        else:
            assert total >= published, f"requests_total went down from {published} to {total}"
        assert total <= served, f"{total} requests counted, {served} served since the exporter's first read"
        published = total
