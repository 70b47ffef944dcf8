"""With `--source prometheus`, a pod whose ModelMesh broke after its exporter had read it: the exporter keeps
serving that read's values, with their time, and says `modelmesh_exporter_collector_success{collector="modelmesh"}
0` beside them, counting its failed reads by reason. The scrape source names that a `garbage` problem of the pod
("its exporter cannot read ModelMesh since its last good read at ..."); the Prometheus source only let the pod turn
stale: /debug's `source.problems` [], no count, no log line, while the runtime held "1 of 2 ready pods stale".
Now it says the scrape source's words, from one more query a refresh that answers only the failing pods.
"""

from __future__ import annotations

import logging

import pytest
from pytest_aiohttp import AiohttpServer

from autoscaler import cli
from autoscaler.api.app import build_api_app
from autoscaler.kube.timestamps import rfc3339
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.server import build_source
from autoscaler.settings import settings_from_args
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.base import SourceProblem
from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import two_pods, two_pods_answering
from tests.sources.test_prometheus_garbled_debug import ClientFactory, source_problems
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals
from tests.support.clock import SteppedClock

SAID = "its exporter cannot read ModelMesh since its last good read at"


def modelmesh_collector(pod: str, at: float, success: float, **failed_reads: float) -> list[Sample]:
    """The exporter's word on its ModelMesh collector at a scrape at `at`: its last attempt's success, and its failed
    reads so far by reason."""
    labels = {"namespace": TRITON.namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
    modelmesh = labels | {"collector": names.COLLECTOR_MODELMESH}
    return [Sample(names.COLLECTOR_SUCCESS, modelmesh, success, at),
            *(Sample(names.SCRAPE_ERRORS_TOTAL, modelmesh | {"reason": reason}, count, at)
              for reason, count in failed_reads.items())]


@pytest.mark.slow
async def test_a_modelmesh_that_fails_after_a_good_read_is_named_as_why_the_pod_is_stale(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], aiohttp_client: ClientFactory,
        caplog: pytest.LogCaptureFixture, now: float) -> None:
    at = now - AGE_S
    last_read = float(int(at) - 100)  # a-1's last good ModelMesh read; its exporter has failed since
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at, signals(rps=12.5, queue=0.02, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=last_read),
        *modelmesh_collector("a-1", at, 0.0, http=12, connect=3),
        *exporter_series("team-a", "a-2", at, signals(rps=10, queue=0.01, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
        *modelmesh_collector("a-2", at, 1.0, http=1),  # failed once, long ago: its last read was good
    ])
    clock = SteppedClock(now)
    source = PrometheusSource(two_pods(TRITON), prom.url, clock=clock)
    sources.append(source)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=clock, monotonic=clock)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        await refresher.refresh_once()
        await refresher.refresh_once()  # (the same instant: Prometheus's clock is ours)

    [problem] = await source_problems(client)
    assert (problem["pod"], problem["reason"], problem["since"]) == ("a-1", "garbage", rfc3339(now)), problem
    assert f"{SAID} {rfc3339(last_read)} (connect: 3, http: 12 failed reads; " in problem["detail"], problem
    assert source.errors[REASON_GARBAGE] == 2, source.errors  # counted at each refresh
    said = [record.getMessage() for record in caplog.records if "cannot read ModelMesh" in record.getMessage()]
    assert len(said) == 1 and "team-a/a-1" in said[0], said  # said once
    [snapshot] = await source.collect(clock.now)
    held = next(pod for pod in snapshot.pods if pod.name == "a-1")
    assert (held.requests_per_second, held.sampled_at) == (12.5, last_read), held  # its values as ever


async def test_the_problem_goes_when_modelmesh_answers_and_a_failed_query_fails_no_refresh(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """Prometheus says a-1's collector fails (as the stand-in writes it), then its query fails alone (an answer of
    the wrong shape), then a-1's exporter reads ModelMesh again: a problem, then a good refresh without that word
    (nor a line saying it ended), then none and one line saying so."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answers, series = stub.source, stub.answers, stub.series
    failing = source.queries[-1]
    stub.answer(now - 5, 40.0)
    answers[failing] = [series("a-1", 0.0)]  # no counts by reason: an exporter that does not count them
    with caplog.at_level(logging.DEBUG, logger=source_module.__name__):
        await source.collect(now)
        [problem] = source.problems(TRITON)
        answers[failing] = [{"metric": {}, "value": "not a sample"}]
        [snapshot] = await source.collect(now + 15)
        failed_alone = source.problems(TRITON)
        answers[failing] = []
        await source.collect(now + 30)

    assert (problem.pod, problem.reason) == ("a-1", "garbage"), problem
    assert f"{SAID} {rfc3339(now - 5)} (no {names.SCRAPE_ERRORS_TOTAL}" in problem.detail, problem.detail
    assert snapshot.source_ok and source.last_error is None
    assert [pod.requests_per_second for pod in snapshot.pods] == [40.0, 10.0]
    assert failed_alone == ()
    assert source.problems(TRITON) == ()
    lines = [record.getMessage() for record in caplog.records
             if "team-a/a-1" in record.getMessage() and record.levelno >= logging.INFO]
    assert len(lines) == 2 and "cannot read ModelMesh" in lines[0] and "again" in lines[1], lines


@pytest.mark.slow
async def test_the_query_reads_the_pods_by_the_label_flags_and_only_from_the_jobs_the_selector_trusts(
        start_prometheus: StartPrometheus, now: float) -> None:
    """A Prometheus with the classic relabelling's label names, and a tenant's job (a Pushgateway keeping the labels
    it is pushed with) saying a-2's collector fails: a-1's own exporter is named, a-2 is not."""
    at = now - AGE_S
    renamed = {"namespace": "kubernetes_namespace", "pod": "kubernetes_pod_name"}
    pushed = {"job": "pushgateway", "instance": "pushgateway:9091"}
    samples = [
        *exporter_series("team-a", "a-1", at, signals(rps=5, queue=0, misses=0, cache=0.5, models=2),
                         last_success=at - 30),
        *modelmesh_collector("a-1", at, 0.0, timeout=4),
        *exporter_series("team-a", "a-2", at, signals(rps=5, queue=0, misses=0, cache=0.5, models=2),
                         last_success=at),
        *modelmesh_collector("a-2", at, 1.0),
        *(Sample(sample.name, {**sample.labels, **pushed}, sample.value, at + 1)
          for sample in modelmesh_collector("a-2", at, 0.0, http=99)),
    ]
    prom = await start_prometheus([
        Sample(sample.name, {renamed.get(key, key): value for key, value in sample.labels.items()}, sample.value,
               sample.timestamp) for sample in samples])
    args = cli.build_parser().parse_args([
        "serve", "--source", "prometheus", "--prometheus-url", prom.url,
        "--prometheus-namespace-label", "kubernetes_namespace", "--prometheus-pod-label", "kubernetes_pod_name",
        "--prometheus-series-selector", 'job="modelmesh-exporter"'])
    source = build_source(settings_from_args(args, {}), two_pods(TRITON))
    try:
        await source.collect(now)
        problems = source.problems(TRITON)
    finally:
        await source.close()

    assert [(problem.pod, problem.reason) for problem in problems] == [("a-1", "garbage")], problems
    [problem] = problems
    assert isinstance(problem, SourceProblem) and "(timeout: 4 failed reads; " in problem.detail, problem
