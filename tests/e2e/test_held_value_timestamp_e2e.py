"""The `timestamp` of a held value, seen through the real processes as the HPA, KEDA, /debug and Prometheus read
the adapter: fake ModelMesh → two real exporters → the adapter, one exporter stopped while its pod stays Ready.

The values are then held because of that pod ("1 of 2 ready pods stale; holding values"): they stand on its last
sample too, so the `timestamp` served with them, the KEDA document's and /debug's must be at least as old as that
sample. Was: the timestamp of the fresh pod's sample, a second old, while /debug said the other pod's data was
43 s old.

`modelmesh_autoscaler_metric_freshness_seconds` measures how far the source lags (the fresh samples the adapter
reads), not the held pod's age: pinned at that age, one dead exporter fired the adapter-wide alert
ModelMeshAutoscalerStaleValues, with the age stuck in the highest bucket.
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import DEPLOYMENT, DataPath, data_path_running
from tests.support.kubectl import get_raw
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow

FRESHNESS = "modelmesh_autoscaler_metric_freshness_seconds"
STALE_BEYOND_S = 5.0
"""How old the stopped exporter's last sample must be before the answers are read: a histogram bucket's bound."""


def parse_rfc3339(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def debug_runtime(path: DataPath) -> dict[str, Any]:
    status, body = http_get(f"{path.adapter_url}/debug/runtimes/default/{DEPLOYMENT}")
    if status != 200:
        return {}
    document: dict[str, Any] = json.loads(body)
    return document


def stale_pod_last_sample(path: DataPath) -> float | None:
    """The Unix time of pod-1's last sample once /debug calls it stale and older than `STALE_BEYOND_S`, with
    the values held and known; else None."""
    document = debug_runtime(path)
    pods = {pod["name"]: pod for pod in document.get("pods", [])}
    pod = pods.get("pod-1")
    if not document.get("known") or pod is None or pod["fresh"] or pod["age_s"] is None:
        return None
    if pod["age_s"] <= STALE_BEYOND_S or "ready pods stale; holding values" not in document["reason"]:
        return None
    last: float = document["refreshed_at"] - pod["age_s"]
    return last


def freshness(path: DataPath) -> tuple[float, float]:
    """The freshness histogram's (count, count at or under `STALE_BEYOND_S`), from the adapter's /metrics."""
    status, text = http_get(f"{path.adapter_url}/metrics")
    assert status == 200, text
    samples = {(s.name, s.labels.get("le")): s.value
               for family in text_string_to_metric_families(text) if family.name == FRESHNESS
               for s in family.samples}
    return samples.get((f"{FRESHNESS}_count", None), 0.0), samples.get((f"{FRESHNESS}_bucket", "5.0"), 0.0)


def test_values_held_for_a_stale_pod_carry_its_last_sample_time(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=2, rps=50, adapter_args=["--max-staleness", "3"]) as path:
        poll(lambda: path.value("modelmesh_desired_replicas"), timeout=40)
        path.kill_exporter(1)
        last = poll(lambda: stale_pod_last_sample(path), timeout=40)

        before, young_before = freshness(path)
        code, answer = get_raw(path.kubeconfig, path.metric_path("modelmesh_desired_replicas"))
        assert code == 0, answer
        served_at = parse_rfc3339(answer["items"][0]["timestamp"])
        assert served_at <= last, (answer, last)

        status, body = http_get(f"{path.adapter_url}/keda/v1/namespaces/default/runtimes/{DEPLOYMENT}")
        assert status == 200, body
        assert parse_rfc3339(json.loads(body)["timestamp"]) <= last, (body, last)

        document = debug_runtime(path)
        assert document["values"]["modelmesh_desired_replicas"]["timestamp"] <= last, document["values"]

        # Both answers served above stand on the live exporter's samples, a refresh or two old, though their
        # `timestamp` is older than STALE_BEYOND_S: they land in the buckets up to it.
        def served_twice() -> tuple[float, float] | None:
            seen = freshness(path)
            return seen if seen[0] >= before + 2 else None

        count, young = poll(served_twice, timeout=10)
        assert young >= young_before + 2, (before, young_before, count, young)
