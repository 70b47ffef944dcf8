"""`modelmesh_pod_requests_total` over a ModelMesh restart that the exporter can tell only some reads later.

With per-model metrics on, a new `mm` container has no series of a model before it serves it. Where the new
container first serves only a model new to this pod, nothing in its answers says it is new (its instance record is
published, the old models' series are merely missing, as in a cut body): the new model's series count as a new
series, in full. When an old model comes back below its old count, the restart is told; the exporter forgot every
series since the restart and counted the new model's requests a second time: `requests_total` jumped 90 -> 131 in a
read where 11 requests happened (a reviewer's run). Now the series read after the old container's last read keep
their counts as baselines at the restart: each request is counted once.
"""

from __future__ import annotations

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.modelmesh_text import SAMPLES_READ
from tests.exporter.modelmesh_wire import ModelMeshContainer
from tests.support.clock import SteppedClock

INTERVAL_S = 5.0
START = 1_800_000_000.0


class Pod:
    """One pod's `mm` container, per-model metrics on, and the exporter's ModelMesh collector reading it."""

    def __init__(self) -> None:
        self.clock = SteppedClock(START)
        self.container = ModelMeshContainer(self.clock, per_model=True)
        self.container.publish(models=1, lru_time_s=START - 100.0)
        self.collector = ModelMeshCollector(CollectorHealth(clock=self.clock), "http://127.0.0.1:2112/metrics",
                                            clock=self.clock, wall_clock=self.clock)

    def read(self, lacking: str | None = None) -> str | None:
        """One read, its body without `lacking`'s series (a model's lines left out, as a body may lack them); what
        the collector says at it (`CollectorHealth.succeeded` logs it: a restart's line)."""
        self.clock.advance(INTERVAL_S)
        body = self.container.render(frozenset(SAMPLES_READ))
        if lacking is not None:
            body = "".join(line for line in body.splitlines(keepends=True) if f'"{lacking}"' not in line)
        self.collector.ingest(body, self.clock())
        return self.collector.window.news

    def requests_total(self) -> float:
        total = self.served(names.REQUESTS_TOTAL)
        assert total is not None
        return total

    def served(self, name: str) -> float | None:
        """The value of the exporter's series `name`, as a scrape of the sidecar gets it (None: not served)."""
        return next((sample.value for family in self.collector.collect() for sample in family.samples
                     if sample.name == name), None)


def test_a_restart_told_only_when_an_old_model_comes_back_counts_no_request_twice() -> None:
    pod = Pod()
    pod.read()  # the baseline
    for _ in range(6):
        pod.container.serve(10.0, model="model-a")
        pod.read()
    assert pod.requests_total() == 60.0
    pod.container.restart()
    pod.container.publish(models=1, lru_time_s=pod.clock() - 1.0)
    said = []
    for _ in range(3):  # the new container serves only model-b, which this pod never had
        pod.container.serve(10.0, model="model-b")
        said.append(pod.read())
    assert pod.requests_total() == 90.0
    assert said == [None] * 3
    served = 90.0
    for requests_a in (1.0, 2.0, 3.0):  # model-a again, from a low count: the restart is told here
        pod.container.serve(10.0, model="model-b")
        pod.container.serve(requests_a, model="model-a")
        served += 10.0 + requests_a
        said.append(pod.read())
        assert pod.requests_total() == served
    assert [line and line.split(":")[0] for line in said[3:]] == [
        "ModelMesh restarted (3 of its counter series went down)", None, None]


def test_a_series_kept_across_a_restart_back_below_its_old_count_is_the_new_containers_not_a_second_restart(
) -> None:
    """A reviewer's run: the bodies after model-a's last read of the old container lack it while model-b goes on;
    the new container serves model-a (low: the restart is told), and model-b's old count is kept, as it may have
    been the new container's. When model-b comes back at 3, below it, in the same new container, that was one
    more "ModelMesh restarted" line, the restarts seen 1 -> 2, and no rate at that read."""
    pod = Pod()
    pod.container.serve(100.0, model="model-a")
    pod.container.serve(100.0, model="model-b")
    pod.read()  # the baseline
    for _ in range(3):  # model-a's lines left out of the bodies; model-b read on
        pod.container.serve(10.0, model="model-b")
        pod.read(lacking="model-a")
    assert pod.requests_total() == 30.0
    pod.container.restart()
    pod.container.publish(models=1, lru_time_s=pod.clock() - 1.0)
    pod.container.serve(5.0, model="model-a")
    told = pod.read()  # model-a at 5, below its 100: told here
    assert told is not None and told.startswith("ModelMesh restarted (")
    pod.container.serve(5.0, model="model-a")
    assert pod.read() is None
    pod.container.serve(5.0, model="model-a")
    pod.container.serve(3.0, model="model-b")  # model-b again, from 0 in the new container: below its kept 130
    said = pod.read()
    assert said is None, f"one restart said twice: {said}"
    assert pod.collector.window.resets == 1
    assert pod.requests_total() == 30.0 + 5.0 + 5.0 + 5.0 + 3.0
    # the rate since the new container's first read (where the window started again), not none
    assert pod.served(names.REQUESTS_PER_SECOND) == (5.0 + 5.0 + 3.0) / (2 * INTERVAL_S)
    pod.container.serve(5.0, model="model-a")
    pod.container.serve(3.0, model="model-b")
    assert pod.read() is None
    assert pod.requests_total() == 56.0


def test_a_second_restart_is_told_though_a_kept_series_comes_back_low_with_it() -> None:
    """Not every kept series back low is the new container's first count: with another series down at the same
    read, it is a second restart, said as one."""
    pod = Pod()
    pod.container.serve(100.0, model="model-a")
    pod.container.serve(100.0, model="model-b")
    pod.read()  # the baseline
    pod.container.serve(10.0, model="model-b")
    pod.read(lacking="model-a")
    pod.container.restart()
    pod.container.publish(models=1, lru_time_s=pod.clock() - 1.0)
    pod.container.serve(50.0, model="model-a")
    assert (pod.read() or "").startswith("ModelMesh restarted (")  # model-a 50, below its 100; model-b kept
    pod.container.restart()
    pod.container.publish(models=1, lru_time_s=pod.clock() - 1.0)
    pod.container.serve(4.0, model="model-a")
    pod.container.serve(3.0, model="model-b")
    assert (pod.read() or "").startswith("ModelMesh restarted (")  # model-a 4, below its 50: a second restart
    assert pod.collector.window.resets == 2
    assert pod.requests_total() == 10.0 + 50.0 + 4.0 + 3.0


def test_a_kept_series_back_low_proves_the_others_kept_from_its_read_old_too() -> None:
    """A kept series back below its count proves a new container since its last read, so since every read before
    it: model-a, kept from the same read of the second container as model-e, counted on from its 15 when the third
    served it 15 times, and those requests were lost (`requests_total` 15 short in a fuzz where it had been
    right)."""
    pod = Pod()
    pod.container.serve(50.0, model="model-f")
    pod.read()  # the baseline
    pod.container.restart()
    pod.container.publish(models=2, lru_time_s=pod.clock() - 1.0)
    pod.container.serve(15.0, model="model-a")
    pod.container.serve(13.0, model="model-e")
    assert pod.read() is None  # only models new to the pod: nothing tells the new container
    pod.container.restart()
    pod.container.publish(models=1, lru_time_s=pod.clock() - 1.0)
    pod.container.serve(29.0, model="model-f")
    assert (pod.read() or "").startswith("ModelMesh restarted (")  # model-f 29, below its 50: told
    pod.container.serve(10.0, model="model-e")
    assert pod.read() is None  # model-e 10, below its kept 13: this container's, counted in full
    pod.container.serve(15.0, model="model-a")
    assert pod.read() is None
    assert pod.collector.window.resets == 1
    assert pod.requests_total() == 15.0 + 13.0 + 29.0 + 10.0 + 15.0
