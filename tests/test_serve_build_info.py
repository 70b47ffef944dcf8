"""`serve`'s /metrics names the build the adapter runs, `modelmesh_autoscaler_build_info{version, revision} 1`, as
`prometheus_build_info` does: during a rollout, which replicas are still the old release. Every release said
0.1.0 and no series named a build. The real `serve` runs here (in one process, and with two serving workers each
of whose pages carries the refresh process's series), from this checkout: its revision is the checkout's HEAD.
/version, which kubectl and the aggregator read first, said `"gitCommit": ""` all the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.names import ADAPTER_BUILD_INFO
from tests.exporter.test_exporter_app import promtool_findings
from tests.exporter.test_exporter_version import VERSION, checkout_head
from tests.hardening.adapter import adapter_running
from tests.support.processes import http_get, poll


@pytest.mark.parametrize("workers", [0, 2])
def test_the_adapters_metrics_name_its_build(tmp_path: Path, workers: int) -> None:
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"],
                         ["--refresh-interval", "3600", "--workers", str(workers)]) as adapter:
        def page() -> str | None:
            status, body = http_get(f"{adapter.url}/metrics")
            return body if status == 200 and ADAPTER_BUILD_INFO in body else None

        body = poll(page, timeout=60)
    assert promtool_findings(body) == (0, "")
    found = [(sample.labels, sample.value) for family in text_string_to_metric_families(body)
             for sample in family.samples if sample.name == ADAPTER_BUILD_INFO]
    assert found == [({"version": VERSION, "revision": checkout_head()}, 1.0)]


def test_the_adapters_version_document_names_the_commit_its_metrics_and_version_flag_name(tmp_path: Path) -> None:
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"], ["--refresh-interval", "3600"]) as adapter:
        status, body = http_get(f"{adapter.url}/version")
    assert status == 200, body
    info = json.loads(body)
    assert info["gitCommit"] == checkout_head()
    assert info["gitVersion"] == f"v{VERSION}"
    # k8s.io/apimachinery/pkg/version.Info: every field a string, which kubectl's decoding requires
    assert all(isinstance(value, str) for value in info.values()), info
