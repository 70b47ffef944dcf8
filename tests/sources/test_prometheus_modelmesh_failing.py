"""With `--source prometheus`, a pod whose ModelMesh broke after its exporter had read it: the exporter keeps
serving that read's values, with their time, and says `modelmesh_exporter_collector_success{collector="modelmesh"}
0` beside them, counting its failed reads by reason. The scrape source names that a `garbage` problem of the pod
("its exporter cannot read ModelMesh since its last good read at ..."); the Prometheus source only let the pod turn
stale: /debug's `source.problems` [], no count, no log line, while the runtime held "1 of 2 ready pods stale".
Now it says the scrape source's words, from one more query a refresh that answers only the failing pods.
"""

from __future__ import annotations

import logging
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from autoscaler import cli
from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeKey
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.base import SourceProblem
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_unseen import REASON_UNSEEN, UNSEEN_WARN_AFTER_S
from exporter import names
from tests.api.builders import served_source
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import Answers, answering_prometheus, series_at, two_pods, two_pods_answering
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_garbled_debug import ClientFactory, source_problems
from tests.sources.test_prometheus_source import AGE_S, MLSERVER, TRITON, exporter_series, signals
from tests.support.clock import SteppedClock

STALE_S = RuntimePolicy().max_staleness_s
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
    # Ours is Prometheus's clock at each read: the source takes a Prometheus whose time() is over a second from
    # ours for a clock that is off, and moves the times it reads back by the difference. A clock set once before
    # the backfill and Prometheus's start, and later once before the served app's start, were 2 s behind on a
    # loaded machine (two CI runs on 7 December: the last good read 2 s early; made to fail with a 2 s stall
    # after the app's start), so it is set again as each read starts.
    clock = SteppedClock(time.time())
    source = PrometheusSource(two_pods(TRITON), prom.url, clock=clock)
    sources.append(source)
    refresher, client = await served_source(source, clock, aiohttp_client)
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        clock.now = first = time.time()
        await refresher.refresh_once()
        clock.now = time.time()
        await refresher.refresh_once()

    [problem] = await source_problems(client)
    assert (problem["pod"], problem["reason"], problem["since"]) == ("a-1", "garbage", rfc3339(first)), problem
    assert f"{SAID} {rfc3339(last_read)} (connect: 3, http: 12 failed reads; " in problem["detail"], problem
    assert source.errors[REASON_GARBAGE] == 2, source.errors  # counted at each refresh
    said = [record.getMessage() for record in caplog.records if "cannot read ModelMesh" in record.getMessage()]
    assert len(said) == 1 and "team-a/a-1" in said[0], said  # said once
    clock.now = time.time()
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


MODELMESH_COLLECTOR = f'{{collector="{names.COLLECTOR_MODELMESH}"}}'
NEVER_SAID = (f"its exporter cannot read ModelMesh ({names.COLLECTOR_SUCCESS}{MODELMESH_COLLECTOR} 0, no good read "
              "since it started)")
SCRAPING_BLAMED = ("is it scraping", "not discovered", "namespaceSelector")


def never_read(namespace: str, pod: str, at: float, **failed_reads: float) -> list[Sample]:
    """One scrape of an exporter that never read ModelMesh (a wrong --modelmesh-url, a CA that does not sign its
    certificate): its GPU busy and its collectors' word, no load signal, no ModelMesh success time."""
    labels = {"namespace": namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
    modelmesh = labels | {"collector": names.COLLECTOR_MODELMESH}
    return [*exporter_series(namespace, pod, at, {}, gpus=[0.5]),
            Sample(names.COLLECTOR_SUCCESS, modelmesh, 0.0, at),
            *(Sample(names.SCRAPE_ERRORS_TOTAL, modelmesh | {"reason": reason}, count, at)
              for reason, count in failed_reads.items())]


@pytest.mark.slow
async def test_an_exporter_that_never_read_modelmesh_is_named_in_the_scrape_sources_words_not_blamed_on_scraping(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """a-2's exporter never read ModelMesh while a-1's works; every pod of team-b's runtime so. Prometheus scrapes
    all of them: it has their collectors' word. Was: a-2 an `unseen` problem and a line asking whether Prometheus
    scrapes it, team-b's runtime named as a namespace Prometheus does not scrape; nothing said of ModelMesh."""
    at = now - AGE_S
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at, signals(rps=12.5, queue=0.02, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
        *modelmesh_collector("a-1", at, 1.0),
        *never_read("team-a", "a-2", at, connect=40),
        *never_read(MLSERVER.namespace, "b-1", at, tls=40),
        *never_read(MLSERVER.namespace, "b-2", at, tls=40),
    ])
    discovery = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1", "a-2"],
                                    (MLSERVER.namespace, MLSERVER.deployment): ["b-1", "b-2"]})
    source = PrometheusSource(discovery, prom.url)
    sources.append(source)
    url = prom.url.rstrip("/")
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        await source.collect(now)
        snapshots = await source.collect(now + UNSEEN_WARN_AFTER_S + 1)  # past every grace: all said by now

    said = [record.getMessage() for record in caplog.records]
    assert not [line for line in said if any(blame in line for blame in SCRAPING_BLAMED)], said
    named = [line for line in said if "cannot read ModelMesh" in line]
    assert sorted(pod for pod in ("team-a/a-2", "team-b/b-1", "team-b/b-2") for line in named if pod in line) == [
        "team-a/a-2", "team-b/b-1", "team-b/b-2"], named  # each pod once
    assert all(url in line and "--modelmesh-url" in line for line in named), named
    assert not [line for line in named if "team-a/a-1" in line], named
    for key, pods in ((TRITON, ["a-2"]), (MLSERVER, ["b-1", "b-2"])):
        problems = source.problems(key)
        assert [(problem.pod, problem.reason, problem.since) for problem in problems] == [
            (pod, REASON_GARBAGE, now) for pod in pods], problems
        assert all(problem.detail.startswith(f"Prometheus at {url}: {NEVER_SAID}, so it publishes no load signals")
                   and "--modelmesh-ca-file" in problem.detail for problem in problems), problems
    assert source.errors[REASON_GARBAGE] == 3, source.errors  # the three pods, at the refresh that said them
    triton = next(snapshot for snapshot in snapshots if snapshot.key == TRITON)
    assert [(pod.name, pod.requests_per_second) for pod in triton.pods] == [("a-1", 12.5), ("a-2", None)], triton


async def test_a_fleet_none_of_whose_exporters_ever_read_modelmesh_is_not_a_prometheus_outage(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """Both pods' exporters say their ModelMesh collector fails, and neither has a load series (the stand-in
    answers the failing collectors' query only). Was: an outage, `empty`, asking whether Prometheus scrapes the
    exporters. Now each pod is named: shown at once, said and counted once it is `max_staleness_s` old (a new pod's
    exporter may not have read its ModelMesh yet: a rollout is no error), and said again when it reads."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answers, series = stub.source, stub.answers, stub.series
    answers[source.queries[-1]] = [series("a-1", 0.0), series("a-2", 0.0)]
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        [first] = await source.collect(now)
        shown_at_once, counted_at_once = source.problems(TRITON), source.errors[REASON_GARBAGE]
        said_at_once = [record.getMessage() for record in caplog.records if "ModelMesh" in record.getMessage()]
        await source.collect(now + STALE_S)
        said = [record.getMessage() for record in caplog.records]
        stub.answer(now + STALE_S + 10, 40.0)  # a-1's exporter reads ModelMesh (a-2's too: the stand-in has both)
        answers[source.queries[-1]] = []
        await source.collect(now + STALE_S + 15)

    assert first.source_ok and source.last_error is None, source.last_error
    assert [(problem.pod, problem.reason) for problem in shown_at_once] == [("a-1", "garbage"), ("a-2", "garbage")]
    assert NEVER_SAID in shown_at_once[0].detail, shown_at_once[0].detail
    assert said_at_once == [] and counted_at_once == 0, (said_at_once, counted_at_once)
    assert not [line for line in said if any(blame in line for blame in SCRAPING_BLAMED)], said
    named = [line for line in said if "cannot read ModelMesh" in line]
    assert len(named) == 2 and "team-a/a-1" in named[0] and "team-a/a-2" in named[1], named  # each once
    assert source.errors[REASON_GARBAGE] == 2, source.errors
    assert source.problems(TRITON) == ()
    back = [record.getMessage() for record in caplog.records if "read ModelMesh again" in record.getMessage()]
    assert len(back) == 1 and "team-a/a-1" in back[0], back


PODS = {"a-1": TRITON, "a-2": TRITON, "b-1": MLSERVER, "b-2": MLSERVER}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(states=st.lists(st.sampled_from(["reads", "never_read", "unscraped"]), min_size=4, max_size=4))
async def test_only_pods_prometheus_has_nothing_of_are_blamed_on_its_scraping(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture, states: list[str], now: float) -> None:
    """Two runtimes of two pods, each pod's exporter read by Prometheus and working, scraped but never having read
    ModelMesh, or not scraped at all: each never-read pod is named, said and counted once, in the scrape source's
    words, and is no missing pod nor makes its runtime unseen; a pod not scraped is `unseen` as before (its
    runtime's, where no pod of it has series); the working pods' values are theirs."""
    state = dict(zip(PODS, states, strict=True))
    assume(any(said != "unscraped" for said in states))  # none at all: Prometheus's `empty` outage, as ever
    answers: Answers = {}
    discovery = StaticDiscovery.of({(key.namespace, key.deployment): [pod for pod in PODS if PODS[pod] == key]
                                    for key in (TRITON, MLSERVER)})
    source = PrometheusSource(discovery, await answering_prometheus(aiohttp_server, answers))
    freshness, _gpu, rps, *_, failing = source.queries
    later = now + UNSEEN_WARN_AFTER_S + 1  # past every grace

    def series(pod: str, value: float) -> dict[str, object]:
        return series_at(PODS[pod].namespace, now)(pod, value)

    answers[rps] = [series(pod, 7.0) for pod in PODS if state[pod] == "reads"]
    answers[failing] = [series(pod, 0.0) for pod in PODS if state[pod] == "never_read"]
    caplog.clear()
    try:
        with caplog.at_level(logging.INFO, logger=source_module.__name__):
            for stamp in (now, later - 5):
                answers[freshness] = [series(pod, stamp) for pod in PODS if state[pod] == "reads"]
                snapshots = await source.collect(stamp + 5)
    finally:
        await source.close()

    expected: set[tuple[RuntimeKey, str | None, str]] = set()
    for pod, key in PODS.items():
        others_answered = any(state[other] != "unscraped" for other in PODS if PODS[other] == key)
        if state[pod] == "never_read":
            expected.add((key, pod, REASON_GARBAGE))
        elif state[pod] == "unscraped":
            expected.add((key, pod if others_answered else None, REASON_UNSEEN))
    problems = [(key, problem) for key in (TRITON, MLSERVER) for problem in source.problems(key)]
    assert {(key, problem.pod, problem.reason) for key, problem in problems} == expected, problems
    assert all(NEVER_SAID in problem.detail for _, problem in problems if problem.reason == REASON_GARBAGE)
    never_read = sorted(f"{PODS[pod].namespace}/{pod}" for pod in PODS if state[pod] == "never_read")
    named = [record.getMessage() for record in caplog.records if "cannot read ModelMesh" in record.getMessage()]
    assert sorted(pod for pod in never_read for line in named if f"{pod}:" in line) == never_read, named
    blamed = [record.getMessage() for record in caplog.records
              if any(blame in record.getMessage() for blame in SCRAPING_BLAMED)]
    assert not [line for line in blamed if any(pod in line for pod in never_read)], blamed
    assert source.errors[REASON_GARBAGE] == len(never_read), source.errors
    read = {pod.name: pod.requests_per_second for snapshot in snapshots for pod in snapshot.pods}
    assert read == {pod: 7.0 if state[pod] == "reads" else None for pod in PODS}, read


async def test_an_exporter_that_starts_again_while_modelmesh_stays_broken_is_said_again(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """a-1's exporter cannot read ModelMesh after a good read, then starts again (an OOM kill, a rollout of the
    sidecar) with ModelMesh still broken: the last good read's values are gone with the old process, and /debug's
    words turn from "since its last good read" to "no good read since it started", while the source holds the
    last good values at their time. Was: the log said only the first; the exporter's restart went unsaid."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answers, series = stub.source, stub.answers, stub.series
    failing = source.queries[-1]
    stub.answer(now - 5, 40.0)
    answers[failing] = [series("a-1", 0.0)]
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        await source.collect(now)
        answers[stub.freshness] = [series("a-2", now + 10)]  # a-1's new exporter has no success time
        answers[stub.rps] = [series("a-2", 10.0)]
        for step in (15, 30):  # said once, not at each refresh
            [snapshot] = await source.collect(now + step)

    [problem] = source.problems(TRITON)
    assert NEVER_SAID in problem.detail, problem.detail
    lines = [record.getMessage() for record in caplog.records if "team-a/a-1" in record.getMessage()]
    assert len(lines) == 2, lines
    assert SAID in lines[0] and NEVER_SAID in lines[1] and "started again" in lines[1], lines
    assert [(pod.requests_per_second, pod.sampled_at) for pod in snapshot.pods] == [(40.0, now - 5), (10.0, now + 10)]


async def test_a_fleet_of_exporters_started_again_while_modelmesh_stays_broken_is_said_in_one_line(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """A sidecar's rollout over twelve pods whose ModelMesh fails everywhere: one line with their count, not twelve."""
    pods = [f"a-{index}" for index in range(12)]
    answers: Answers = {}
    source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): pods}),
                              await answering_prometheus(aiohttp_server, answers))
    sources.append(source)
    freshness, _gpu, rps, *_, failing = source.queries
    series = series_at(TRITON.namespace, now)
    answers[freshness] = [series(pod, now - 5) for pod in pods]
    answers[rps] = [series(pod, 7.0) for pod in pods]
    answers[failing] = [series(pod, 0.0) for pod in pods]
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        await source.collect(now)
        answers[freshness], answers[rps] = [], []  # every exporter started again: no success time
        await source.collect(now + 15)

    restarted = [record.getMessage() for record in caplog.records if "started again" in record.getMessage()]
    assert len(restarted) == 1 and "the exporters of 12 pods" in restarted[0], restarted
    assert all(NEVER_SAID in problem.detail for problem in source.problems(TRITON))
