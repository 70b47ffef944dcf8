"""An HPA whose metric selects another runtime than the one it scales, as the operator sees it: /debug and the log.

rt2's HPA (scaleTargetRef: the RuntimeScale rt2) had its metric's selector edited to `servingruntime=rt3`. The
HPA then scales rt2 on rt3's value, rt2 stays where it is, and the adapter applies both HPAs' bounds to rt3. An
on-call reviewer found /debug of rt2 with `"warnings": []` and of rt3 saying nothing either; the one clue was a
WARNING `runtime .../rt3 is scaled by 2 HPAs (...)` attributed to the other runtime. With a typo'd selector
(`deployment=modelmesh-serving-triton`, no runtime) the INFO line said `rt2 no HPA any more`, which is false: the
HPA is there, it selects something else. Now /debug of both runtimes says it, and so does the log line.

The HPA watch runs against the fake API, and the refresher is wired to it as `autoscaler.server` wires them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.api.debug_document import debug_json
from autoscaler.api.render import render_snapshot
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
RT2 = RuntimeKey(NS, "modelmesh-serving-rt2")
RT3 = RuntimeKey(NS, "modelmesh-serving-rt3")
HPA2, HPA3 = "modelmesh-serving-rt2-autoscaler", "modelmesh-serving-rt3-autoscaler"


class TwoRuntimes(SourceDefaults):
    name = "static"
    errors: dict[str, int] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(PodSample(name=f"{key.deployment}-{i}", sampled_at=now - 1, gpu_busy=0.5,
                                                     requests_per_second=10.0, queue_delay_s=0.0, lru_age_s=900.0,
                                                     cache_used_ratio=0.5, models_loaded=1.0) for i in range(2)),
                                now, replicas=2) for key in (RT2, RT3)]

    async def close(self) -> None:
        return None


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        kube = server
        kube.add_hpa(NS, HPA2, max_replicas=10, target=("RuntimeScale", "rt2"),
                     metric_selector={"servingruntime": "rt2"})
        kube.add_hpa(NS, HPA3, max_replicas=10, target=("RuntimeScale", "rt3"),
                     metric_selector={"servingruntime": "rt3"})
        yield kube


@pytest.fixture
async def watch(kube: FakeKubeApi) -> AsyncIterator[HpaWatch]:
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, backoff=lambda n: 0.02)
    await subject.start()
    await eventually(lambda: subject.bounds(RT2) == (1, 10) and subject.bounds(RT3) == (1, 10))
    yield subject
    await subject.close()


def select(kube: FakeKubeApi, hpa: str, labels: dict[str, str]) -> None:
    """`kubectl edit` of the HPA's metric selector."""
    def change(obj: dict[str, Any]) -> None:
        obj["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"] = labels

    kube.update_object("horizontalpodautoscalers", NS, hpa, change)


async def debug_documents(watch: HpaWatch) -> dict[RuntimeKey, dict[str, Any]]:
    book = PolicyBook()
    refresher = Refresher(TwoRuntimes(), book, AdapterMetrics())
    refresher.hpa_bounds = watch.bounds  # as autoscaler.server wires them
    refresher.hpa_warnings = watch.warnings
    await refresher.refresh_once()
    snapshot = render_snapshot(refresher.views, True, policies=book)
    documents = {}
    for key in (RT2, RT3):
        record = snapshot.runtimes.debug_record(key)
        assert record is not None
        documents[key] = json.loads(debug_json(record))
    return documents


async def test_an_hpa_selecting_another_runtime_is_said_in_the_debug_of_both(kube: FakeKubeApi,
                                                                             watch: HpaWatch) -> None:
    quiet = await debug_documents(watch)
    assert quiet[RT2]["warnings"] == [] and quiet[RT3]["warnings"] == []
    select(kube, HPA2, {"servingruntime": "rt3"})
    await eventually(lambda: watch.bounds(RT2) == (None, None))
    documents = await debug_documents(watch)
    [rt3] = documents[RT3]["warnings"] or [""]
    assert "scaled by 2 HPAs" in rt3 and HPA2 in rt3 and HPA3 in rt3, documents[RT3]["warnings"]
    [rt2] = documents[RT2]["warnings"] or [""]
    assert "no HPA selects this runtime" in rt2 and HPA2 in rt2 and RT3.deployment in rt2, documents[RT2]["warnings"]


async def test_a_typo_in_the_selector_is_said_as_what_the_hpa_selects_now(
        kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.kube_hpas"):
        select(kube, HPA2, {"deployment": "modelmesh-serving-triton"})
        await eventually(lambda: watch.bounds(RT2) == (None, None))
    [line] = [r.getMessage() for r in caplog.records if "HPA bounds" in r.getMessage()]
    assert "no HPA any more" not in line, line
    assert f"{RT2} no HPA selects it any more ({HPA2} now selects {NS}/modelmesh-serving-triton)" in line, line
    documents = await debug_documents(watch)
    [rt2] = documents[RT2]["warnings"] or [""]
    assert "no HPA selects this runtime" in rt2 and "modelmesh-serving-triton" in rt2, documents[RT2]["warnings"]
    assert "not a runtime the adapter knows" in rt2, rt2


async def test_an_hpa_deleted_is_said_as_deleted(kube: FakeKubeApi, watch: HpaWatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.kube_hpas"):
        kube.delete_object("horizontalpodautoscalers", NS, HPA2)
        await eventually(lambda: watch.bounds(RT2) == (None, None))
    [line] = [r.getMessage() for r in caplog.records if "HPA bounds" in r.getMessage()]
    assert f"{RT2} no HPA selects it any more ({HPA2} deleted)" in line, line
    documents = await debug_documents(watch)
    assert documents[RT2]["warnings"] == []  # a runtime nobody scales is no mistake
