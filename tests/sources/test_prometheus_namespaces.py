"""`--namespaces` narrows the Prometheus queries to the pods discovery reads, against a real Prometheus.

`PrometheusSource` never learnt the namespaces: every query read every pod a shared Prometheus knows, in every
namespace, and one refused for its size (`--query.max-samples`, HTTP 422 `too many samples`) failed every refresh
of an adapter that serves a single namespace. Discovery is the real one, against the fake Kubernetes API.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler import cli
from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_discovery, build_source, policy_book
from autoscaler.sources.prometheus_matchers import one_of
from tests.fakes.kube import FakeKubeApi
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.sources.test_prometheus_source import exporter_series, signals

DEPLOYMENT = "modelmesh-serving-triton"
OTHER_TENANTS = 40
"""Pods of runtimes in a namespace the adapter does not serve, which the shared Prometheus also holds."""


def scraped(namespace: str, pods: list[str], now: float, rps: float) -> list[Sample]:
    return [sample for pod in pods
            for sample in exporter_series(namespace, pod, now - 5, signals(rps, 0, 0, 0.5, 2), last_success=now - 5)]


def by_pod(snapshots: list[RuntimeSnapshot]) -> dict[tuple[str, str], PodSample]:
    return {(snapshot.key.namespace, pod.name): pod for snapshot in snapshots for pod in snapshot.pods}


@pytest.mark.slow
async def test_an_adapter_of_some_namespaces_reads_their_pods_from_a_prometheus_too_big_for_every_pod(
    tmp_path: Path
) -> None:
    """`--namespaces team-a`, and a policy-file runtime in team-c (its pods watched, and so read, too); Prometheus
    also holds 40 pods of another tenant and refuses any query that would load all of them. team-a's and team-c's
    values are read, and a refresh is good."""
    now = time.time()
    async with FakeKubeApi() as kube:
        kube.clock = lambda: now - 60  # the pods were created before they were scraped: the series are theirs
        team_a = kube.add_modelmesh_runtime("team-a", DEPLOYMENT, replicas=2)
        team_c = kube.add_modelmesh_runtime("team-c", DEPLOYMENT, replicas=1)
        others = kube.add_modelmesh_runtime("other-tenant", DEPLOYMENT, replicas=OTHER_TENANTS)
        samples = [*scraped("team-a", team_a, now, 10), *scraped("team-c", team_c, now, 30),
                   *scraped("other-tenant", others, now, 99)]
        tsdb = create_blocks(openmetrics_text(samples), tmp_path / "tsdb")
        policy = tmp_path / "policy.yaml"
        policy.write_text(f"runtimes:\n  - {{namespace: team-c, deployment: {DEPLOYMENT}}}\n")
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path, extra_args=["--query.max-samples=60"]) as prom:
            settings = settings_from_args(cli.build_parser().parse_args([
                "serve", "--source", "prometheus", "--prometheus-url", prom.url, "--namespaces", "team-a",
                "--kubeconfig", str(kubeconfig), "--config", str(policy)]), {})
            discovery = build_discovery(settings, policy_book(settings))
            source = build_source(settings, discovery)
            try:
                await discovery.start()
                snapshots = await source.collect(now)
            finally:
                await source.close()
                await discovery.close()

    assert all(snapshot.source_ok for snapshot in snapshots)  # no 422: the queries read team-a and team-c only
    pods = by_pod(snapshots)
    assert {key: pod.requests_per_second for key, pod in pods.items()} == {
        **{("team-a", pod): 10 for pod in team_a}, **{("team-c", pod): 30 for pod in team_c}}


NAMESPACE = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)


@given(served=st.lists(NAMESPACE, min_size=1, max_size=6, unique=True), other=NAMESPACE)
def test_the_namespace_matcher_matches_exactly_the_namespaces_given(served: list[str], other: str) -> None:
    """Prometheus anchors a matcher's regular expression: it must match each namespace given, and no other (a
    prefix or a longer name included), whatever the names."""
    matcher = one_of("namespace", served)
    label, op, quoted = re.fullmatch(r'(\w+)(=~?)"(.*)"', matcher).groups()  # type: ignore[union-attr]
    pattern = quoted.replace('\\"', '"').replace("\\\\", "\\")
    matches = (lambda name: name == pattern) if op == "=" else (lambda name: re.fullmatch(pattern, name) is not None)

    assert label == "namespace"
    assert all(matches(name) for name in served)
    assert matches(other) == (other in served)
