"""A `cache_pressure_cap` or `target_rps_per_pod` above the range any runtime needs, that release ecc8de1 (and
a3a0b238 after it) took, is used as given after the upgrade, with a WARNING saying what it does, never refused.

An outside upgrade review: a runtime annotated `autoscaler.modelmesh.io/cache-pressure-cap=20` served 40 on the old
release (three full pods, pressure 55.3, held to 20 x the 2 pods its copies in use fill) and 6 on the new one,
which ignored the annotation (`cache_pressure_cap must be > 0 and at most 10`) for the built-in 1.2: the HPA read
40 or 6 by replica during the rollout, then scaled down while every cache was full. The same values in the
policy file stopped every new replica at start (`cannot start: ... at most 10, got 12`; `target_rps_per_pod
2000000`: `at most 1,000,000`), and the rollout stalled. docs/operations.md promises that an upgrade never lowers
what runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.sources.base import SourceDefaults
from tests.api.builders import served_source
from tests.support.ports import free_port
from tests.support.processes import running, wait_until_logged
from tests.test_serve_policy_edits import debug_document, write_targets

RELEASE = Path(__file__).with_name("upgrade")
OLD_POLICY = (RELEASE / "ecc8de1-policy.yaml").read_text()
ABOVE = "above the range any runtime needs, used as given"

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
T0 = 1_700_000_000.0
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment={KEY.deployment}")
CAP = "autoscaler.modelmesh.io/cache-pressure-cap"


def test_the_old_policy_file_with_values_above_the_range_starts_serves_and_warns(tmp_path: Path) -> None:
    """The policy ConfigMap ecc8de1 shipped, edited as the reviewer's was: a new replica starts (it stopped with
    `cannot start`), serves, and its log says each value is above the range and used as given."""
    edited = (OLD_POLICY.replace("cache_pressure_cap: 1.2 ", "cache_pressure_cap: 12  ")
              .replace("target_rps_per_pod: null", "target_rps_per_pod: 2000000"))
    assert "cache_pressure_cap: 12 " in edited and "target_rps_per_pod: 2000000" in edited
    config, targets, log = tmp_path / "policy.yaml", tmp_path / "targets.yaml", tmp_path / "adapter.log"
    config.write_text(edited)
    write_targets(targets, {})
    listen = free_port()
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/rt-a"
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--refresh-interval", "1"]
    with running(args, url, log) as adapter:
        wait_until_logged(adapter, log, "cache_pressure_cap 12", "target_rps_per_pod 2000000")
        policy = debug_document(url)["policy"]
    lines = log.read_text().splitlines()
    cap = [line for line in lines if "cache_pressure_cap 12" in line]
    rps = [line for line in lines if "target_rps_per_pod 2000000" in line]
    assert len(cap) == 1 and len(rps) == 1, lines  # once, at start
    assert "WARNING" in cap[0] and f"{config}: defaults" in cap[0] and ABOVE in cap[0], cap
    assert "12 x the Ready pods" in cap[0] and "at most 10 is meant" in cap[0], cap
    # a pod reads at most 1,000,000 req/s: over 2,000,000 a pod the term asks for at most half the pods it counts
    assert "WARNING" in rps[0] and ABOVE in rps[0] and "0.5 x the pods it counts" in rps[0], rps
    assert "at most 1,000,000 is meant" in rps[0], rps
    assert policy["cache_pressure_cap"]["value"] == 12.0 and policy["cache_pressure_cap"]["from"] == (
        f"{config}: defaults"), policy["cache_pressure_cap"]
    assert ABOVE in policy["cache_pressure_cap"]["warning"], policy["cache_pressure_cap"]
    assert policy["target_rps_per_pod"]["value"] == 2_000_000.0, policy["target_rps_per_pod"]
    assert ABOVE in policy["target_rps_per_pod"]["warning"], policy["target_rps_per_pod"]
    assert "ignored" not in policy["cache_pressure_cap"] and "ignored" not in policy["target_rps_per_pod"]


class FullCaches(SourceDefaults):
    """Three Ready pods whose caches are full (10 models each, cache use 1.0), each of which served all ten
    models m0..m9 two seconds ago (copies counted: two of a model, 20), the oldest copy anywhere used 12 s ago,
    GPU busy 0.1; the Deployment annotated with `annotations`."""

    name = "static"
    errors: dict[str, int] = {}

    def __init__(self, clock: Callable[[], float], annotations: dict[str, str]) -> None:
        self.clock, self.annotations = clock, annotations

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(name=f"p-{i}", sampled_at=now - 1, gpu_busy=0.1, requests_per_second=5.0,
                               queue_delay_s=0.0, lru_age_s=12.0, cache_used_ratio=1.0, models_loaded=10.0,
                               recent_models={f"m{j}": now - 2 for j in range(10)})
                     for i in range(3))
        return [RuntimeSnapshot(KEY, pods, now, replicas=3, annotations=self.annotations)]

    async def close(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def served(annotations: dict[str, str], aiohttp_client: ClientFactory,
                 refreshes: int = 1) -> tuple[str, dict[str, Any]]:
    """The value the HPA reads and the /debug document, after `refreshes` refreshes 15 s apart."""
    clock = Clock()
    refresher, client = await served_source(FullCaches(clock, annotations), clock, aiohttp_client)
    for _ in range(refreshes):
        await refresher.refresh_once()
        clock.now += 15
    async with client.get(METRIC) as response:
        assert response.status == 200, await response.text()
        [item] = (await response.json())["items"]
    async with client.get(DEBUG) as response:
        document: dict[str, Any] = await response.json()
    return str(item["value"]), document


async def test_a_cache_pressure_cap_annotation_above_the_range_is_served_as_written(
        aiohttp_client: ClientFactory, caplog: pytest.LogCaptureFixture) -> None:
    # Pressure: 600 s / 12 s = 50. The copies in use, 20 at 10 models a pod, fill 2 pods. At cap 20 the pressure
    # term is 3 pods x min(20, 50) = 60, held to 20 x 2 = 40: 40 pods, as the old release served. The GPU asks
    # for 3 x 0.1 / 0.8 = 0.375, 1 pod.
    with caplog.at_level(logging.WARNING, logger="autoscaler.policies.config"):
        value, document = await served({CAP: "20"}, aiohttp_client, refreshes=3)
    assert value == "40000m", value  # 40 pods, in the quantity the HPA reads
    assert document["policy"]["cache_pressure_cap"]["value"] == 20.0, document["policy"]["cache_pressure_cap"]
    assert document["policy"]["cache_pressure_cap"]["from"] == f"annotation {CAP}"
    assert "ignored" not in document["policy"]["cache_pressure_cap"], document["policy"]["cache_pressure_cap"]
    warning = document["policy"]["cache_pressure_cap"]["warning"]
    assert ABOVE in warning and "20 x the Ready pods" in warning and "at most 10 is meant" in warning, warning
    assert "held to 20 x the 2 pods" in str(document), document
    said = [r.getMessage() for r in caplog.records if "cache_pressure_cap 20" in r.getMessage()]
    assert len(said) == 1, said  # once for the value, not at every refresh
    assert f"{CAP}='20'" in said[0] and ABOVE in said[0], said


async def test_without_the_annotation_the_built_in_cap_serves_what_it_did(aiohttp_client: ClientFactory) -> None:
    # Cap 1.2: 3 x 1.2 = 3.6, held to 1.2 x 2 = 2.4, above the need of 2: 3 pods. No warning.
    value, document = await served({}, aiohttp_client)
    assert value == "3000m", value
    assert document["policy"]["cache_pressure_cap"] == {"value": 1.2, "from": "built-in"}
