"""What `modelmesh_pod_requests_total` promises over a ModelMesh container's life, as the exporter serves it.

Whatever a container does between the exporter's reads (serves, restarts, publishes its instance record late) and
whatever reaches the exporter (whole bodies, bodies cut down to the instance gauges, bodies missing some series), it
never goes down, and it never counts a request twice: it stays at most the requests served since the exporter's
first read. That holds however late a restart is told: a new container read first after it published and served
(a refused read is no read) is told only by a series below its old count, some reads later where it first serves
only models new to the pod; the series read since the old container's last read count on from their last counts
then, not in full again (`test_counter_restarts_told_late_property`: they counted twice, and a series that came back
above its old count before then may lose that count instead). A new container told at once forgets every old count.
The one exception: a body of a container that has not published its record yet, without labelled series the
exporter read of it (cut down to the instance gauges, or missing them), reads as a new JVM's first answer, which it
cannot be told from (docs/design.md): the old counts are forgotten, so what the container holds may count again; the
bound grows by that there, and is re-armed at the next new container told at once (from there `requests_total`
again rises by at most what is served).

And nothing is lost in a crash loop (`test_a_crash_loop_loses_no_request_it_read`): each JVM read before it
publishes, then after it serves, `requests_total` is exactly what the JVMs read with their counts served since the
exporter's first read, whatever bodies came between: cut down to the instance gauges, or, after its count, missing
its requests' series (with per-model metrics off and one code served, a body with no labelled series left, after
which the next JVM's restart is told by the series remembered, not by the last body's); a JVM that died before a
read with its count is lost, as nothing of it was read.

A body with the instance record and without counter series (per-model metrics on) was read as a restart: the old
counts were forgotten, and the next whole body counted ModelMesh's whole history again. `test_modelmesh_lifecycle`
shows that case over HTTP.

The exporter's first read is a whole body here: a first read cut down to the instance gauges, with per-model metrics
on, leaves nothing to count from, and the next read counts what ModelMesh served before the exporter started
(`exporter.counters`; with per-model metrics off the unlabelled histograms make that read a new baseline).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from hypothesis import example, given, settings
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


def labelled_series(body: str) -> frozenset[str]:
    """The labelled counter series a body ModelMesh answered holds (name and labels): with per-model metrics on,
    all of them; off, the request series (`code`). A body without the instance record and without any such series
    the exporter read before reads as a new JVM's first answer (`exporter.counters`: nothing tells them apart)."""
    return frozenset(line.rsplit(" ", 1)[0] for line in body.splitlines() for name in SAMPLES_READ
                     if not name.startswith("modelmesh_instance") and line.startswith(f"{name}{{"))


def requests_total(collector: ModelMeshCollector) -> float | None:
    """`modelmesh_pod_requests_total` as the exporter serves it (None before its first good read)."""
    for family in collector.collect():
        for sample in family.samples:
            if sample.name == names.REQUESTS_TOTAL:
                return sample.value
    return None


def started(per_model: bool, queue_timed: bool, before: int,
            ) -> tuple[SteppedClock, ModelMeshContainer, ModelMeshCollector]:
    """A published ModelMesh that served `before` requests before the exporter started (not its to count), and the
    collector that reads it on the stepped clock."""
    clock = SteppedClock(START)
    container = ModelMeshContainer(clock, per_model=per_model, queue_timed=queue_timed)
    container.publish(models=len(MODELS), lru_time_s=START - 100.0)
    container.serve(float(before), model=MODELS[0])
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:2112/metrics", clock=clock,
                                   wall_clock=clock)
    return clock, container, collector


@settings(max_examples=300, deadline=None)
@given(per_model=st.booleans(), queue_timed=st.booleans(), before=st.integers(0, 100_000),
       steps=st.lists(STEP, min_size=1, max_size=30))
@example(per_model=True, queue_timed=False, before=0, steps=[  # a new JVM serves before it publishes; a cut body
    Step(served=(), restart=False, publish=False, body="down", dropped=0),
    Step(served=((0, 0, 1),), restart=True, publish=False, body="whole", dropped=0),  # the first read: baseline 1
    Step(served=(), restart=False, publish=False, body="cut", dropped=0),  # no record, no series: a restart
    Step(served=(), restart=False, publish=False, body="whole", dropped=0),  # its 1 counts (again)
])
@example(per_model=False, queue_timed=True, before=0, steps=[  # the same with a body missing the only code served
    Step(served=(), restart=False, publish=False, body="down", dropped=0),
    Step(served=((0, 0, 1),), restart=True, publish=False, body="whole", dropped=0),
    Step(served=(), restart=False, publish=False, body="missing", dropped=0),
    Step(served=(), restart=False, publish=False, body="whole", dropped=0),
])
@example(per_model=True, queue_timed=False, before=0, steps=[  # a body missing the one model read, with another
    Step(served=(), restart=False, publish=False, body="whole", dropped=0),
    Step(served=(), restart=True, publish=False, body="whole", dropped=0),  # told at once
    Step(served=((1, 0, 1),), restart=False, publish=False, body="whole", dropped=0),
    Step(served=((0, 0, 1),), restart=False, publish=False, body="missing", dropped=1),  # none of the old left
    Step(served=(), restart=False, publish=False, body="whole", dropped=0),  # model-b's 1 counts again
])
def test_requests_total_never_goes_down_and_counts_no_request_twice(
    per_model: bool, queue_timed: bool, before: int, steps: list[Step],
) -> None:
    clock, container, collector = started(per_model, queue_timed, before)
    served = 0.0  # since the exporter's first good read
    published: float | None = None
    unread = False  # a new container the exporter has taken no read of yet (a refused read is none)
    busy = False  # it published or served before that first read
    slack = 0.0  # how far requests_total may be above `served`: what bodies read as a new JVM's first answer held
    held = float(before)  # what the running container counts: all it served since its start
    recorded = True  # it has published its instance record
    seen: frozenset[str] = frozenset()  # its labelled counter series the exporter has read
    for index, step in enumerate(steps):
        clock.advance(INTERVAL_S)
        if step.restart:
            container.restart()
            unread, busy, held, recorded, seen = True, False, 0.0, False, frozenset()
        if step.publish or index == 0:
            container.publish(models=len(MODELS), lru_time_s=clock() - 1.0)
            recorded = True
        for model, code, requests in step.served:
            container.serve(float(requests), model=MODELS[model], code=CODES[code])
            held += requests
            served += requests if published is not None else 0.0
        busy = busy or step.publish or bool(step.served)
        if step.body == "down":
            continue
        body = answered(container, step) if published is not None else container.render(frozenset(SAMPLES_READ))
        told = False
        try:
            collector.ingest(body, clock())
        except ScrapeFailure:  # refused: nothing changes, and a new container is still unread
            pass
        else:
            told = unread and not busy and published is not None
            unread = False
            if published is not None and not recorded and seen - labelled_series(body):
                # Lacking series read before, without the record, it may read as a new JVM's first answer (none of
                # the old series left: docs/design.md, nothing tells them apart): the old counts are forgotten, and
                # what the container holds counts in full again as its series come back
                slack += held
            seen |= labelled_series(body)
        total = requests_total(collector)
        assert total is not None or published is None
        if total is None:
            continue
        if published is None:
            assert total == 0.0, "the first read is the baseline"
        else:
            assert total >= published, f"requests_total went down from {published} to {total}"
        assert total - served <= slack, (f"{total} requests counted, {served} served since the exporter's first "
                                         f"read; {slack} held by bodies read as a new JVM's first answer")
        if published is not None and told:
            # A new container told at once: every old count is forgotten, so nothing counted since the exporter's
            # first read can count again
            slack = total - served
        published = total


@dataclass(frozen=True)
class Jvm:
    """One JVM of a crash loop: read before it publishes, then serves, then maybe read with its count."""

    requests: int
    """What it serves once it published its record."""
    code: int
    """The code of its requests (a crash-looping runtime answers each JVM's requests alike, often as the last's)."""
    read: bool
    """Read with its count before it dies (False: it died first, nothing of it read)."""
    cut: tuple[str, ...]
    """The bodies read between its first read and its serving: `cut` (instance gauges only) or `whole`."""
    after: tuple[str, ...]
    """The bodies read after its count, before it dies: `cut`, `whole`, or `missing` (its requests' lines left out:
    with per-model metrics off, a body without the only code served, so without any labelled series)."""


JVM = st.builds(Jvm, requests=st.integers(0, 40), code=st.integers(0, len(CODES) - 1), read=st.booleans(),
                cut=st.lists(st.sampled_from(["cut", "whole"]), max_size=2).map(tuple),
                after=st.lists(st.sampled_from(["missing", "cut", "whole"]), max_size=2).map(tuple))


@settings(max_examples=200, deadline=None)
@given(per_model=st.booleans(), queue_timed=st.booleans(), before=st.integers(0, 100_000),
       jvms=st.lists(JVM, min_size=1, max_size=12))
@example(per_model=False, queue_timed=False, before=0, jvms=[  # modelmesh-serving's defaults
    Jvm(requests=5, code=0, read=True, cut=(), after=("missing",)),
    Jvm(requests=8, code=0, read=True, cut=(), after=()),  # its restart was told only by its first read
])
def test_a_crash_loop_loses_no_request_it_read(
    per_model: bool, queue_timed: bool, before: int, jvms: list[Jvm],
) -> None:
    clock, container, collector = started(per_model, queue_timed, before)

    def read(body: str = "whole", model: str = MODELS[0], code: str = CODES[0]) -> None:
        clock.advance(INTERVAL_S)
        lines = container.render(frozenset(SAMPLES_READ)).splitlines(keepends=True)
        if body == "cut":
            lines = [line for line in lines if "modelmesh_instance" in line]
        elif body == "missing":
            gone = f'"{model}"' if per_model else f'code="{code}"'
            lines = [line for line in lines if gone not in line]
        with contextlib.suppress(ScrapeFailure):  # per-model metrics off: refused, nothing changes
            collector.ingest("".join(lines), clock())

    read()
    counted = 0.0  # served by the JVMs read with their count
    for index, jvm in enumerate(jvms):
        container.restart()
        read()  # the new JVM, before it publishes: no labelled series, no instance record
        container.publish(models=len(MODELS), lru_time_s=clock() - 1.0)
        for body in jvm.cut:
            read(body)
        model, code = MODELS[index % len(MODELS)], CODES[jvm.code]
        container.serve(float(jvm.requests), model=model, code=code)
        if jvm.read:
            read()
            counted += jvm.requests
            for body in jvm.after:
                read(body, model, code)
        assert requests_total(collector) == counted
