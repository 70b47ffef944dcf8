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

    def read(self) -> str | None:
        """One read; what the collector says at it (`CollectorHealth.succeeded` logs it: a restart's line)."""
        self.clock.advance(INTERVAL_S)
        self.collector.ingest(self.container.render(frozenset(SAMPLES_READ)), self.clock())
        return self.collector.window.news

    def requests_total(self) -> float:
        return next(sample.value for family in self.collector.collect() for sample in family.samples
                    if sample.name == names.REQUESTS_TOTAL)


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
