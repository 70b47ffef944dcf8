"""An exporter whose ModelMesh read never works (a wrong `--modelmesh-url`, a CA that does not sign ModelMesh's
certificate) publishes no request rate, as a healthy one before its second read does; but it never will. Seen as
a platform engineer sees it: `/debug/runtimes/NS/DEPLOYMENT`, the adapter's `/metrics` and its log. Fake ModelMesh
→ real exporters (one pointed at a port where nothing listens) → the adapter, scraping (`serve --targets`).

Was: taken for an exporter before its second read, the pod was held without a word: `source.problems` [], no
`source_errors_total`, no log line, while the runtime held ("1 of 2 ready pods stale") and never scaled down.
And where ModelMesh failed after the exporter had read it (the exporter serving its last good values, with their
time), the pod only turned stale: `problems` [], the log "1 of 2 ready pods stale; holding values", no count; with
`--source prometheus` (a real Prometheus scraping the exporters) still so after the scrape source said why.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.fakes.prometheus import PrometheusServer
from tests.support.api_peek import kubectl_reads
from tests.support.processes import free_port, http_get, poll
from tests.support.quantities import quantity_value

pytestmark = pytest.mark.slow

DEAD = "https://127.0.0.1:1/metrics"
"""A ModelMesh URL where nothing listens: the exporter's every read fails (connect)."""


def problems(path: DataPath) -> list[dict[str, object]]:
    """The runtime's `source.problems` in /debug; none before the adapter's first refresh (503)."""
    status, body = http_get(f"{path.adapter_url}/debug/runtimes/default/{DEPLOYMENT}")
    return list(json.loads(body)["source"]["problems"]) if status == 200 else []


def load_served(path: DataPath) -> None:
    """Wait until kubectl reads a request load above 0 (awaited without kubectl: `api_peek`)."""
    kubectl_reads(path.kubeconfig, path.metric_path("modelmesh_request_load"),
                  lambda code, body: code == 0 and quantity_value(body["items"][0]["value"]) > 0, timeout=60)


def garbage_errors(path: DataPath, source: str = "scrape") -> float:
    status, body = http_get(f"{path.adapter_url}/metrics")
    assert status == 200, body
    found = re.search(rf'modelmesh_autoscaler_source_errors_total\{{reason="garbage",source="{source}"\}} (\S+)', body)
    return 0.0 if found is None else float(found[1])


def test_an_exporter_that_cannot_read_modelmesh_is_a_problem_named_counted_and_said_once(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=2, exporter_args=[[], ["--modelmesh-url", DEAD]]) as path:
        [problem] = poll(lambda: problems(path), timeout=30)
        assert (problem["reason"], problem["pod"]) == ("garbage", "pod-1"), problem
        detail = str(problem["detail"])
        assert path.exporter_urls[1] in detail, detail  # the exporter to look at
        assert "cannot read ModelMesh" in detail and "--modelmesh-url" in detail and "CA" in detail, detail
        assert garbage_errors(path) > 0
        poll(lambda: garbage_errors(path) >= 3, timeout=30)  # a few refreshes later: still one line
        said = [line for line in path.adapter_log().splitlines()
                if "autoscaler.sources.scrape" in line and "pod-1" in line]
        assert len([line for line in said if "cannot read ModelMesh" in line]) == 1, said
        assert not [line for line in said if "pod-0" in line], said


def test_a_modelmesh_that_fails_after_working_is_named_as_why_its_pod_is_stale(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=2) as path:
        load_served(path)
        assert problems(path) == []
        path.set_load(1, fault="error")  # pod-1's ModelMesh answers 500 from now on; its exporter keeps its values
        [problem] = poll(lambda: problems(path), timeout=30)
        assert (problem["reason"], problem["pod"]) == ("garbage", "pod-1"), problem
        detail = str(problem["detail"])
        assert path.exporter_urls[1] in detail, detail
        assert "its exporter cannot read ModelMesh" in detail and "since its last good read at 20" in detail, detail
        assert "(http: " in detail, detail  # the exporter's own reason, counted: ModelMesh answered 500
        poll(lambda: garbage_errors(path) >= 3, timeout=30)  # counted at each refresh; said once
        said = [line for line in path.adapter_log().splitlines()
                if "autoscaler.sources.scrape" in line and "pod-1" in line]
        assert len([line for line in said if "cannot read ModelMesh" in line]) == 1, said
        assert not [line for line in said if "pod-0" in line], said

        path.set_load(1, fault=None)  # healed: the problem goes, and the log says so
        poll(lambda: problems(path) == [] or None, timeout=30)
        poll(lambda: f"scrape of default/{DEPLOYMENT}/pod-1 recovered" in path.adapter_log() or None, timeout=10)


async def test_with_prometheus_a_modelmesh_that_fails_after_working_is_named_in_the_scrape_sources_words(
        tmp_path: Path) -> None:
    port = free_port()
    with data_path_running(tmp_path, pods=2, adapter_args=[
            "--source", "prometheus", "--prometheus-url", f"http://127.0.0.1:{port}"]) as path:
        async with PrometheusServer(path.exporter_urls, port=port, target_labels=path.prometheus_target_labels(),
                                    workdir=tmp_path / "prometheus"):
            await asyncio.to_thread(load_served, path)
            assert problems(path) == []
            path.set_load(1, fault="error")  # pod-1's ModelMesh answers 500; its exporter keeps its values
            [problem] = await asyncio.to_thread(poll, lambda: problems(path), timeout=30)
            assert (problem["reason"], problem["pod"]) == ("garbage", "pod-1"), problem
            detail = str(problem["detail"])
            assert f"Prometheus at http://127.0.0.1:{port}: " in detail, detail
            assert "its exporter cannot read ModelMesh since its last good read at 20" in detail, detail
            assert "(http: " in detail, detail  # the exporter's own reason, as Prometheus scraped it
            await asyncio.to_thread(poll, lambda: garbage_errors(path, "prometheus") >= 3, timeout=30)
            said = [line for line in path.adapter_log().splitlines() if "cannot read ModelMesh" in line]
            assert len(said) == 1 and "pod-1" in said[0], said  # counted at each refresh; said once

            path.set_load(1, fault=None)  # healed: the problem goes, and the log says so
            await asyncio.to_thread(poll, lambda: problems(path) == [] or None, timeout=30)
            assert "read ModelMesh again" in path.adapter_log()
