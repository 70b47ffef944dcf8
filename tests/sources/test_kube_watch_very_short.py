"""Pod discovery behind a proxy that ends every watch stream as soon as it opens, with nothing in it (a "very short
watch": a proxy or load balancer closing idle or new streams), as the platform engineer reads its log and /metrics.

Each such watch was reopened a second after it opened and nothing else: `watch_established` read 0 nearly all the
time, but `watch_failures_total` did not move and nothing was logged above DEBUG, so the HPA and RuntimeScale watches'
`ModelMeshAutoscalerWatchFailing` fired after 15 minutes with no cause in the log. client-go's reflector says each at
warning. It is now a failure like a dropped stream (`no_answer`), said once a spell, and the all-clear once a watch
stays open again."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import ApiClient, Configuration
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import discovery
from tests.sources.test_kube_watch_flapping import HPA_LINES, NS, watch_lines
from tests.support.waiting import eventually


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


def watch_failures(metrics: AdapterMetrics, watch: str = "pods") -> dict[str, float]:
    """`modelmesh_autoscaler_watch_failures_total{watch=...}` by reason, as /metrics serves it."""
    text = generate_latest(metrics.registry).decode()
    return {sample.labels["reason"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "modelmesh_autoscaler_watch_failures_total" and sample.labels["watch"] == watch}


async def test_streams_that_end_as_soon_as_they_open_are_said_once_counted_and_their_end_said(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    metrics = AdapterMetrics()
    subject = discovery(kube, health=metrics)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)  # established
        kube.cut_watches = True
        kube.end_watches()
        # a watch a second, each ended as it opened; waited for rather than slept on: a loaded CI machine is slower
        await eventually(lambda: watch_failures(metrics).get("no_answer", 0) >= 2, timeout=15)
        during = watch_failures(metrics)
        kube.cut_watches = False
        with contextlib.suppress(TimeoutError):  # the lines below say what was missing
            await eventually(lambda: watch_lines(caplog)[-1][0] == "INFO" and len(watch_lines(caplog)) > 1, timeout=10)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["INFO", "WARNING", "INFO"], lines
    assert lines[1][1].startswith("Kubernetes discovery: pod watch of namespace modelmesh-serving broken"), lines
    assert "streams end as soon as they open (a proxy or load balancer closing idle or new streams?)" in lines[1][1]
    assert lines[2][1] == "Kubernetes discovery: pod watch of namespace modelmesh-serving established", lines
    assert during["no_answer"] >= 2, during
    assert sum(during.values()) == during["no_answer"], during


async def test_hpa_streams_that_end_as_soon_as_they_open_are_said_and_counted_before_the_alert_fires(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    """The HPA watch, whose `watch_established` staying 0 fires `ModelMeshAutoscalerWatchFailing`: its cause is in
    the log and in `watch_failures_total`."""
    settings = Configuration()
    settings.host = kube.url
    metrics = AdapterMetrics()
    subject = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, backoff=lambda n: 0.02, health=metrics)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_hpas")
    await subject.start()
    try:
        await kube.wait_for_watches(1, "horizontalpodautoscalers")
        kube.cut_watches = True
        kube.end_watches()
        await eventually(lambda: watch_failures(metrics, "hpas").get("no_answer", 0) >= 3, timeout=15)  # and one
        failures = watch_failures(metrics, "hpas")  # more, said no more (it was a 1.5 s sleep: none, under load)
    finally:
        await subject.close()
    lines = watch_lines(caplog, *HPA_LINES)
    assert [level for level, _ in lines] == ["WARNING"], lines
    assert lines[0][1].startswith(f"HPA watch of namespace {NS} failing, keeping the bounds last seen"), lines
    assert "streams end as soon as they open (a proxy or load balancer closing idle or new streams?)" in lines[0][1]
    assert failures["no_answer"] >= 2, failures
