"""A fresh exporter publishes `modelmesh_exporter_scrape_errors_total` at 0 for every reason each of its collectors
counts, before anything failed.

The series was made at a collector's first failure, at 1, and Prometheus sees no increase in a series that first
appears at 1: the dashboard's "Exporter errors" panel (`rate(...)`) never showed a pod's first failure of a
reason, and a rule a user writes with increase() on it missed the first failure (the adapter's counters had the same
defect: tests/api/test_alerted_counters_from_zero.py). The exporter is the real process, reading a healthy ModelMesh
stand-in and a fake NVML's idle GPUs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from autoscaler.sources.exposition import modelmesh_failed_reads
from exporter import names
from exporter.collectors.health import CollectorHealth
from tests.exporter.conftest import ExporterPod
from tests.exporter.test_exporter_app import promtool_findings
from tests.fakes.nvml import FakeNvml
from tests.manifests.support import GRAFANA, PROMETHEUS, label_matchers, load_yaml, not_at_zero
from tests.support.clock import SteppedClock
from tests.support.nested import values_at
from tests.support.processes import free_port, http_get, poll, running

REASONS = {
    "modelmesh": {"connect", "timeout", "tls", "http", "parse", "internal"},
    "gpu": {"nvml", "timeout", "internal", "connect"},
}
"""What each collector counts its failures by, as its code says them (connect for gpu: the pod's own GPUs could
not be told from the kubelet)."""

TARGET_LABELS = frozenset({"job", "namespace", "deployment", "pod", "instance"})
"""Labels of Prometheus's scrape (and the dashboard's variables), not the exporter's."""

_RATED = re.compile(r"\b(?:rate|irate|increase|changes|resets|delta)\(\s*(modelmesh_exporter_\w+)(?:\{([^}]*)\})?\s*\[")


def samples(body: str) -> list[Sample]:
    return [sample for family in text_string_to_metric_families(body) for sample in family.samples]


def errors_by_label(body: str) -> dict[tuple[str, str], float]:
    return {(sample.labels["collector"], sample.labels["reason"]): sample.value for sample in samples(body)
            if sample.name == names.SCRAPE_ERRORS_TOTAL}


def fresh_exporter_metrics(directory: Path, *, gpu: bool) -> str:
    """The /metrics of an exporter whose collectors have each worked and none has failed yet (so none counted)."""
    mm_port, port = free_port(), free_port()
    modelmesh_url = f"http://127.0.0.1:{mm_port}/metrics"
    exporter_url = f"http://127.0.0.1:{port}"
    # A loaded machine may take seconds to answer: no read times out here.
    args = ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", modelmesh_url,
            "--modelmesh-timeout", "60"]
    env: dict[str, str] = {}
    if gpu:
        env = FakeNvml.create(directory, gpus=2).env()
    else:
        args.append("--no-gpu")
    log = directory / "exporter.log"

    def worked() -> str | None:
        body = http_get(f"{exporter_url}/metrics")[1]
        success = {sample.labels["collector"]: sample.value for sample in samples(body)
                   if sample.name == names.COLLECTOR_SUCCESS}
        return body if success and all(success.values()) else None

    with running(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm_port}", "--rps", "5", "--http"],
                 modelmesh_url, directory / "modelmesh.log"), \
         running(args, f"{exporter_url}/healthz", log, env=env):
        body = poll(worked, timeout=60)
    assert "collector failed" not in log.read_text(), log.read_text()  # the premise: nothing failed yet
    return body


@pytest.fixture(scope="module")
def every_collector(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A GPU pod's exporter: the ModelMesh and the GPU collector."""
    return fresh_exporter_metrics(tmp_path_factory.mktemp("gpu"), gpu=True)


def test_each_collector_publishes_each_reason_it_counts_at_0_before_any_failure(every_collector: str) -> None:
    expected = {(collector, reason): 0.0 for collector, reasons in REASONS.items() for reason in reasons}
    assert errors_by_label(every_collector) == expected
    assert promtool_findings(every_collector) == (0, "")


def test_with_no_gpu_only_the_modelmesh_collectors_reasons_are_published(tmp_path: Path) -> None:
    """`--no-gpu` runs no GPU collector: a CPU-only pod publishes none of its series, at 0 or otherwise."""
    body = fresh_exporter_metrics(tmp_path, gpu=False)
    assert errors_by_label(body) == {("modelmesh", reason): 0.0 for reason in REASONS["modelmesh"]}


def rated_exporter_selectors() -> list[tuple[str, str, dict[str, str]]]:
    """(file, sample name, the labels it selects by exact value) of every exporter counter that the shipped
    dashboard or rules take a rate, increase or change of."""
    documents = {
        "modelmesh-autoscaler.json": json.loads((GRAFANA / "modelmesh-autoscaler.json").read_text()),
        "rules.yaml": load_yaml(PROMETHEUS / "rules.yaml"),
        "prometheus-rule.yaml": load_yaml(PROMETHEUS / "prometheus-rule.yaml"),
    }
    found = []
    for where, document in documents.items():
        for expr in values_at(document, "expr"):
            for name, matchers in _RATED.findall(expr):
                exact = {label: value for label, operator, value in label_matchers(f"{{{matchers}}}")
                         if operator == "=" and label not in TARGET_LABELS and "$" not in value}
                found.append((where, name, exact))
    return found


def test_every_exporter_counter_the_dashboard_or_rules_rate_is_at_0_from_the_start(every_collector: str) -> None:
    selectors = rated_exporter_selectors()
    assert selectors, "the dashboard's scrape-errors panel rates the exporter's counter"
    missing = not_at_zero(selectors, samples(every_collector))
    assert not missing, "\n".join(missing)


async def test_the_adapter_names_only_the_reasons_that_failed(
        pod_factory: Callable[..., Awaitable[ExporterPod]]) -> None:
    """The adapter's words for a pod whose exporter cannot read ModelMesh name its failed reads by reason, from the
    exporter's text: the reasons at 0 are no failed reads ('connect: 1, http: 0, internal: 0, ...' buried the one
    that happened)."""
    pod = await pod_factory()
    await pod.read_modelmesh(5)
    await pod.port.down()  # the ModelMesh container gone: its port refuses
    await pod.read_modelmesh(5)
    assert modelmesh_failed_reads(await pod.metrics_text()) == "connect: 1 failed reads"


READS = st.lists(st.one_of(st.none(), st.sampled_from(sorted((collector, reason)
                                                              for collector, reasons in REASONS.items()
                                                              for reason in reasons))), max_size=40)
"""Collections: None for a good one, else the collector that failed and why."""


@settings(max_examples=100, deadline=None)
@given(reads=READS)
def test_no_failure_count_first_appears_above_0_whatever_fails(reads: list[tuple[str, str] | None]) -> None:
    """Whatever fails, in any order, every failure count Prometheus will see was there at 0 before, and each failure
    adds one to one of them."""
    health = CollectorHealth(clock=SteppedClock())
    for collector in REASONS:
        health.register(collector)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(health)
    seen = errors_by_label(generate_latest(registry).decode())
    assert set(seen.values()) == {0.0}, seen
    for read in reads:
        if read is None:
            health.succeeded("modelmesh")
            health.succeeded("gpu")
        else:
            health.failed(*read, "down")
        now = errors_by_label(generate_latest(registry).decode())
        assert now.keys() == seen.keys(), now  # no new series: each was at 0 before it counted
        assert sum(now.values()) - sum(seen.values()) == (0 if read is None else 1)
        seen = now


def test_every_reason_the_exporter_counts_by_is_one_it_publishes_at_0() -> None:
    """A reason added to the code but to no collector's list (`names.COLLECTOR_REASONS`) would first appear at its
    first count, which no rate sees: every `names.REASON_*` the exporter's code names is in a collector's list."""
    code = "".join(path.read_text() for path in Path(names.__file__).parent.rglob("*.py"))
    named = {getattr(names, constant) for constant in re.findall(r"names\.(REASON_[A-Z_]+)", code)}
    published = {reason for reasons in names.COLLECTOR_REASONS.values() for reason in reasons}
    assert named and named <= published, named - published
