"""`modelmesh_pod_requests_total` over ModelMesh restarts the exporter can tell only some reads later.

A new container that first serves only models (or codes) the pod never had looks like the old one missing some
series: nothing tells it new until a series comes back below its old count. Whatever containers serve between
reads, and whichever reads are missed, the published counter never goes down and never counts a request twice: it
stays at most the requests served since the exporter's first read. And it loses only what it could not read: the
requests a container served after its last read, and, for a series a new container had at or above its count in an
older one before the restart was told, that old count (nothing tells whether the last read of it was the old
container's or the new one's: counted on from it, a request is never counted twice). One restart is one
"ModelMesh restarted" line, never two, said at the latest at the first read whose counts prove it (a series lower
than at the read before).

A body of a container that has published its instance record may lack a model's series (a code's, with
per-model metrics off), as the restarts told late come: the series read after another's last read of the old
container are kept, and may come back below. Bodies cut to the instance gauges, or missing series before the
record is published (read as a new JVM: nothing tells them apart), are `test_counter_restarts_property`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import example, given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.modelmesh_text import SAMPLES_READ, ScrapeFailure
from tests.exporter.modelmesh_wire import ModelMeshContainer
from tests.support.clock import SteppedClock

MODELS = ("model-a", "model-b", "model-c", "model-d")
CODES = ("OK", "NOT_FOUND")
INTERVAL_S = 5.0
START = 1_800_000_000.0

Key = tuple[str, str]
"""A request series as the test follows it: (model, code); the model is "" with per-model metrics off."""


@dataclass(frozen=True)
class Step:
    """What happens in ModelMesh before one read."""

    restart: bool
    """A new container first (a new JVM, counters from 0)."""
    publish: bool
    """The (new) container has published its instance record by the read."""
    served: tuple[tuple[int, int, int], ...]
    """(model, code, requests) served since the step before."""
    read: bool
    """The exporter reads ModelMesh (False: the read fails, or the container died before it)."""
    dropped: int | None = None
    """The model (per-model metrics on) or code (off) whose lines the body lacks, where the container has published
    its record (None: a whole body)."""


STEP = st.builds(
    Step,
    restart=st.sampled_from([False, False, True]),
    publish=st.booleans(),
    served=st.lists(st.tuples(st.integers(0, len(MODELS) - 1), st.integers(0, len(CODES) - 1),
                              st.integers(1, 60)), max_size=3).map(tuple),
    read=st.sampled_from([True, True, False]),
    dropped=st.sampled_from([None, 0, 1]),
)

RESTARTED = "ModelMesh restarted ("


def requests_total(collector: ModelMeshCollector) -> float:
    return next(sample.value for family in collector.collect() for sample in family.samples
                if sample.name == names.REQUESTS_TOTAL)


@dataclass
class Served:
    """What really happened, as the test knows it: each container's counts, and what the exporter read of them."""

    counts: dict[Key, float]
    """The running container's request counts."""
    container: int = 0
    read: dict[Key, tuple[int, float]] | None = None
    """Each series' last read: the container read, and its count there."""
    since_first_read: float = 0.0
    """Requests served since the exporter's first good read."""
    unread: float = 0.0
    """Requests of dead containers served after their last read of that series: nothing of them was read."""
    untold: float = 0.0
    """For each series read of a new container at or above its count in an older one, that older count."""

    def restart(self) -> None:
        last = self.read or {}
        for key, count in self.counts.items():
            container, read = last.get(key, (-1, 0.0))
            self.unread += count - (read if container == self.container else 0.0)
        self.counts = {}
        self.container += 1

    def serve(self, key: Key, requests: int) -> None:
        self.counts[key] = self.counts.get(key, 0.0) + requests
        self.since_first_read += requests if self.read is not None else 0.0

    def was_read(self, lacking: str | None = None) -> dict[Key, float]:
        """The body read lacked `lacking`'s series (a model's, or a code's); the counts it held."""
        last = self.read if self.read is not None else {}
        body = {key: count for key, count in self.counts.items() if lacking not in key}
        for key, count in body.items():
            container, read = last.get(key, (self.container, 0.0))
            if container != self.container and count >= read:
                self.untold += read
            last[key] = (self.container, count)
        self.read = last
        return body


@settings(max_examples=300, deadline=None)
@given(per_model=st.booleans(), before=st.integers(0, 1000), steps=st.lists(STEP, min_size=1, max_size=30))
@example(per_model=True, before=60, steps=[  # the reviewer's run: model-b alone first, then model-a back low
    Step(restart=True, publish=True, served=((1, 0, 10),), read=True),
    Step(restart=False, publish=False, served=((1, 0, 10),), read=True),
    Step(restart=False, publish=False, served=((1, 0, 10), (0, 0, 1)), read=True),
])
@example(per_model=True, before=60, steps=[  # a reviewer's: model-b kept across the restart, back low: one line
    Step(restart=False, publish=False, served=((1, 0, 20),), read=True, dropped=0),
    Step(restart=False, publish=False, served=((1, 0, 20),), read=True, dropped=0),
    Step(restart=True, publish=True, served=((0, 0, 5),), read=True),
    Step(restart=False, publish=False, served=((0, 0, 5), (1, 0, 3)), read=True),
])
def test_requests_total_counts_every_request_read_once_however_late_a_restart_is_told(
    per_model: bool, before: int, steps: list[Step],
) -> None:
    clock = SteppedClock(START)
    container = ModelMeshContainer(clock, per_model=per_model)
    container.publish(models=1, lru_time_s=START - 100.0)
    served = Served({})
    if before:
        container.serve(float(before), model=MODELS[0])
        served.serve((MODELS[0] if per_model else "", CODES[0]), before)
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:2112/metrics", clock=clock,
                                   wall_clock=clock)
    collector.ingest(container.render(frozenset(SAMPLES_READ)), clock())  # the baseline
    last_body = {key: (served.container, count) for key, count in served.was_read().items()}
    told = served.container
    """The container of the read that said the last restart (the first read's, before any)."""
    published = requests_total(collector)
    assert published == 0.0
    has_record = True
    for step in steps:
        clock.advance(INTERVAL_S)
        if step.restart:
            container.restart()
            served.restart()
            has_record = False
        if step.publish:
            container.publish(models=1, lru_time_s=clock() - 1.0)
            has_record = True
        for model, code, requests in step.served:
            container.serve(float(requests), model=MODELS[model], code=CODES[code])
            served.serve((MODELS[model] if per_model else "", CODES[code]), requests)
        if not step.read:
            continue
        text = container.render(frozenset(SAMPLES_READ))
        lacking = None
        if step.dropped is not None and has_record:
            lacking = MODELS[step.dropped] if per_model else CODES[step.dropped]
            gone = f'"{lacking}"' if per_model else f'code="{lacking}"'
            text = "".join(line for line in text.splitlines(keepends=True) if gone not in line)
        try:
            collector.ingest(text, clock())
        except ScrapeFailure:  # refused: nothing changes, nothing of this body counts as read
            pass
        else:
            body = served.was_read(lacking)
            said = collector.window.news or ""
            if said.startswith(RESTARTED):
                assert served.container > told, f"container {served.container}'s restart said again: {said}"
                told = served.container
            proof = [key for key, count in body.items()
                     if key in last_body and last_body[key][0] < served.container and count < last_body[key][1]]
            assert not proof or told == served.container, (
                f"{proof} went down since the read before, of container {served.container}: its restart untold")
            last_body = {key: (served.container, count) for key, count in body.items()}
        total = requests_total(collector)
        assert total >= published, f"requests_total went down from {published} to {total}"
        assert total <= served.since_first_read, (
            f"{total} requests counted, {served.since_first_read} served since the exporter's first read: "
            "some counted twice")
        floor = served.since_first_read - served.unread - served.untold
        assert total >= floor - sum(served.counts.values()) + sum(
            count for key, (container_read, count) in (served.read or {}).items()
            if container_read == served.container and key in served.counts), (
            f"{total} requests counted, {served.since_first_read} served since the exporter's first read, of which "
            f"{served.unread} never read and {served.untold} in series a new container had above an old count")
        published = total
