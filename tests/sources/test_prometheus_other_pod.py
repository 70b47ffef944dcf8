"""With `--source prometheus`, Prometheus's target for one pod reaching another pod's exporter (the pod's IP given to
another pod while Prometheus's discovery lags, or a relabelling that names pods wrongly): the hot pod's 200 rps was
read as that pod's too, `modelmesh_request_load` and `modelmesh_desired_replicas` served as if the fleet had one
more hot pod, the hot pod's deletion cost lowered (its load moved to the other name), with nothing in
`source.problems` and no log line, though `modelmesh_exporter_pod_info` in Prometheus said which pod answered
(`exported_pod` beside Prometheus's `pod`: the shipped scrape config does not honour the exporter's labels). Such a
pod is now left out as missing data (its values held, never lowered), as the scrape source refuses an answer that
names another pod: the served values are those of the same fleet with that pod's series absent, `/debug` has an
`other_pod` problem of the pod naming the pod its exporter says, and one WARNING says it. A `pod_info` that names no
pod of its own (an older exporter, `honor_labels` true) is read as always, and so is the classic relabelling's
shape (Prometheus's labels `kubernetes_pod_name`, the exporter's `pod` kept as it is).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeKey
from autoscaler.names import ServedMetric
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.answered_pod import REASON_OTHER_POD, names_another_pod
from autoscaler.sources.base import PodTarget
from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from exporter.pod_identity import PodIdentity
from tests.api.builders import served_source
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals
from tests.support.clock import SteppedClock
from tests.support.quantities import quantity_value

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
PODS = ("a-1", "a-2", "a-3", "a-4")
HOT, COLD = 200.0, 20.0


def pod_info(pod: str, at: float, said: Mapping[str, str], labels: Mapping[str, str] | None = None) -> Sample:
    """The pod's `modelmesh_exporter_pod_info` as Prometheus stores it: its target labels (`labels`, its own
    address unless they give one), and what the exporter said (`said`: `exported_pod` and `exported_namespace`
    with the shipped config)."""
    target = labels or {"namespace": TRITON.namespace, "pod": pod}
    return Sample(names.POD_INFO, {"instance": f"{pod}:9187", **target, "job": "modelmesh-exporter", **said}, 1, at)


def own(pod: str) -> dict[str, str]:
    return {"exported_namespace": TRITON.namespace, "exported_pod": pod}


def fleet(now: float, a_4: list[Sample]) -> list[Sample]:
    """a-1 hot, a-2 and a-3 not; a-3's pod_info from an exporter that names no pod of its own (`honor_labels`
    true, or an older exporter's `pod` only from Prometheus); a-4 as the test says."""
    at = now - AGE_S
    samples: list[Sample] = []
    for pod, rps in (("a-1", HOT), ("a-2", COLD), ("a-3", COLD)):
        samples += exporter_series(TRITON.namespace, pod, at, signals(rps, 0.01, 0.1, 0.5, 2), last_success=at)
    samples += [pod_info("a-1", at, own("a-1")), pod_info("a-2", at, own("a-2")), pod_info("a-3", at, {})]
    return samples + a_4


def reaching_a_1(now: float) -> list[Sample]:
    """Prometheus's target for a-4 reaches a-1's exporter at a-1's address (the IP given to a-1: both targets'
    `instance`): a-1's load under a-4's name, and its pod_info says so."""
    at = now - AGE_S
    series = [*exporter_series(TRITON.namespace, "a-4", at, signals(HOT, 0.01, 0.1, 0.5, 2), last_success=at),
              pod_info("a-4", at, own("a-1"))]
    return [Sample(sample.name, {**sample.labels, "instance": "a-1:9187"}, sample.value, sample.timestamp)
            for sample in series]


async def served(client: Client, key: RuntimeKey) -> dict[str, Any]:
    """The served desired replicas and request load as the HPA reads them (status, value: None where unknown), and
    /debug's pods (name, rps, deletion cost) and problems."""
    values: dict[str, Any] = {}
    for metric in (ServedMetric.DESIRED_REPLICAS, ServedMetric.REQUEST_LOAD):
        async with client.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{key.namespace}/{metric.value}",
                              params={"labelSelector": f"deployment={key.deployment}"}) as response:
            answer = await response.json()
            value = quantity_value(answer["items"][0]["value"]) if response.status == 200 else None
            values[metric.value] = (response.status, value)
    async with client.get(f"/debug/runtimes/{key.namespace}/{key.deployment}") as response:
        document = await response.json()
    values["pods"] = [(pod["name"], pod["requests_per_second"], pod["deletion_cost"]) for pod in document["pods"]]
    values["problems"] = document["source"]["problems"]
    return values


async def serving(start_prometheus: StartPrometheus, sources: list[PrometheusSource], aiohttp_client: ClientFactory,
                  samples: list[Sample], now: float, **flags: Any) -> dict[str, Any]:
    """What the adapter serves after two refreshes on a Prometheus holding `samples`, the second past the warm-up
    (a pod without data is then held, not waited for)."""
    prom = await start_prometheus(samples)
    clock = SteppedClock(now)
    source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): PODS}), prom.url,
                              clock=clock, **flags)
    sources.append(source)
    refresher, client = await served_source(source, clock, aiohttp_client)
    await refresher.refresh_once()
    clock.now += RuntimePolicy().max_staleness_s + 1  # the grace (`warmup_grace_s`'s default)
    await refresher.refresh_once()
    return await served(client, TRITON) | {"url": prom.url.rstrip("/"), "errors": dict(source.errors)}


@pytest.mark.slow
async def test_a_pod_whose_series_come_from_another_pods_exporter_is_served_as_missing(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], aiohttp_client: ClientFactory,
        caplog: pytest.LogCaptureFixture, now: float) -> None:
    missing = await serving(start_prometheus, sources, aiohttp_client, fleet(now, []), now)
    caplog.clear()  # what the fleet with a-4's series absent said (a-4 named as a pod without series)
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        other = await serving(start_prometheus, sources, aiohttp_client, fleet(now, reaching_a_1(now)), now)

    for value in (ServedMetric.DESIRED_REPLICAS.value, ServedMetric.REQUEST_LOAD.value, "pods"):
        assert other[value] == missing[value], (value, other[value], missing[value])
    [problem] = other["problems"]
    assert (problem["pod"], problem["reason"], problem["since"]) == ("a-4", "other_pod", rfc3339(now)), problem
    assert "'team-a/a-1'" in problem["detail"] and other["url"] in problem["detail"], problem["detail"]
    assert other["errors"] == {"other_pod": 2}, other["errors"]  # one per refresh, as a refused scrape is counted
    said = [record for record in caplog.records if "team-a/a-4" in record.getMessage()]
    assert [record.levelname for record in said] == ["WARNING"], [record.getMessage() for record in said]
    assert "'team-a/a-1'" in said[0].getMessage()


@pytest.mark.slow
async def test_a_pod_info_with_prometheus_labels_named_otherwise_is_checked_by_the_exporters_own_labels(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], aiohttp_client: ClientFactory,
        now: float) -> None:
    """The classic relabelling: Prometheus's pod label is `kubernetes_pod_name`, so the exporter's `pod` and
    `namespace` stay as they are; a-4's says a-1, a-1's says a-1 (read), a-2's names no pod (read)."""
    at = now - AGE_S

    def classic(samples: list[Sample]) -> list[Sample]:
        moved = []
        for sample in samples:
            labels = dict(sample.labels)
            labels["kubernetes_namespace"], labels["kubernetes_pod_name"] = labels.pop("namespace"), labels.pop("pod")
            moved.append(Sample(sample.name, labels, sample.value, sample.timestamp))
        return moved

    samples = classic([sample for pod, rps in (("a-1", HOT), ("a-2", COLD), ("a-3", COLD), ("a-4", HOT))
                       for sample in exporter_series(TRITON.namespace, pod, at, signals(rps, 0.01, 0.1, 0.5, 2),
                                                     last_success=at)])
    labels = {pod: {"kubernetes_namespace": TRITON.namespace, "kubernetes_pod_name": pod} for pod in PODS}
    samples += [pod_info("a-1", at, {"namespace": TRITON.namespace, "pod": "a-1"}, labels["a-1"]),
                pod_info("a-2", at, {}, labels["a-2"]),
                pod_info("a-4", at, {"namespace": TRITON.namespace, "pod": "a-1"}, labels["a-4"])]
    other = await serving(start_prometheus, sources, aiohttp_client, samples, now,
                          namespace_label="kubernetes_namespace", pod_label="kubernetes_pod_name")

    assert [(pod, rps) for pod, rps, _ in other["pods"]] == [
        ("a-1", HOT), ("a-2", COLD), ("a-3", COLD), ("a-4", None)], other["pods"]
    assert [(problem["pod"], problem["reason"]) for problem in other["problems"]] == [("a-4", "other_pod")]


SHAPES: Mapping[str, Callable[[str], dict[str, str]]] = {
    "full": lambda pod: {"namespace": TRITON.namespace, "pod": pod},
    "name only": lambda pod: {"pod": pod},
    "none": lambda pod: {},  # an older exporter, or one without the downward API's variables
    "namespace only": lambda pod: {"namespace": TRITON.namespace},
    "another namespace's": lambda pod: {"namespace": "team-b", "pod": pod},
    "odd": lambda pod: {"pod": f'{pod}"\\x'},
}
"""What an exporter says of the pod it runs in, by its name."""
REACHED = st.tuples(st.integers(1, 5), st.sampled_from(sorted(SHAPES)))
"""What Prometheus's target for a pod reaches: the exporter of pod a-N (its own, another of the fleet's, or one the
fleet does not list), at that pod's address, and what that exporter says."""
CLASSIC = ("kubernetes_namespace", "kubernetes_pod_name")


async def left_out(says: Mapping[str, Mapping[str, str]], instances: list[str], labels: tuple[str, str],
                   now: float, workdir: Path) -> set[str]:
    """The pods a source leaves out as other pods', each pod's pod_info saying `says[pod]` (its labels as the
    exporter wrote them) from its target's address (`instances`: two pods' may be one, an IP given again), on a
    real Prometheus that keeps them as a scrape without `honor_labels` does: renamed
    `exported_...` where Prometheus's own labels (`labels`: namespace, pod) take the name."""
    ns_label, pod_label = labels
    at = now - AGE_S
    samples: list[Sample] = []
    for (pod, said), instance in zip(says.items(), instances, strict=True):
        target = {ns_label: TRITON.namespace, pod_label: pod, "instance": instance}
        stored = {(f"exported_{label}" if label in target else label): value for label, value in said.items()}
        samples += [Sample(sample.name, target | {"job": "modelmesh-exporter"}, sample.value, sample.timestamp)
                    for sample in exporter_series(TRITON.namespace, pod, at, signals(COLD, 0.01, 0.1, 0.5, 2),
                                                  last_success=at)]
        samples.append(pod_info(pod, at, stored, target))
    server = PrometheusServer(tsdb_dir=create_blocks(openmetrics_text(samples), workdir / "tsdb"), workdir=workdir)
    await server.start()
    try:
        discovery = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): list(says)})
        source = PrometheusSource(discovery, server.url, namespace_label=ns_label, pod_label=pod_label)
        try:
            [snapshot] = await source.collect(time.time())
        finally:
            await source.close()
    finally:
        await server.close()
    refused = {problem.pod for problem in source.problems(TRITON) if problem.reason == REASON_OTHER_POD}
    assert refused == {pod.name for pod in snapshot.pods if pod.sampled_at is None}, snapshot.pods
    return {pod for pod in refused if pod is not None}


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reached=st.lists(REACHED, min_size=1, max_size=4), classic=st.booleans())
async def test_a_pod_is_left_out_exactly_when_its_exporter_names_another_pod_as_the_scrape_source_judges_it(
        reached: list[tuple[int, str]], classic: bool, now: float, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Whichever exporter each pod's target reaches (its own, another pod's at the address that pod has, two
    targets at one address) and whatever it says (its pod, its name only, nothing, its namespace only, odd
    characters), with the shipped labels or the classic ones: the pods left out are those the scrape source would
    refuse the same answer of (`answered_pod.names_another_pod`, by namespace and name), and only they."""
    pods = {f"a-{i + 1}": SHAPES[shape](f"a-{exporter}") for i, (exporter, shape) in enumerate(reached)}
    instances = [f"10.0.0.{exporter}:9187" for exporter, _ in reached]
    expected = {pod for pod, said in pods.items()
                if names_another_pod(PodIdentity.from_labels(said), TRITON.namespace,
                                     PodTarget(name=pod, ready=True, url=None, uid="known"))}
    workdir = tmp_path_factory.mktemp("prometheus")
    assert await left_out(pods, instances, CLASSIC if classic else ("namespace", "pod"), now, workdir) == expected
