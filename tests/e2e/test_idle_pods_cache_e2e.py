"""Pods that never served a request, over the whole data path: fake ModelMesh containers with per-model metrics →
the real exporters → the real adapter, read as kubectl reads the desired replicas.

ModelMesh places models on a few pods; the others (or pods a scale-up just added) may serve nothing at all, and
their ModelMesh, per-model metrics on, has no counter series yet. Before, their exporters published no last-served
family at all, which the adapter reads as "per-model use missing": the cache term was held (may rise, not fall)
for as long as they stayed idle, and a runtime whose traffic stopped never scaled down.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.e2e.conftest import DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.support.processes import poll

pytestmark = pytest.mark.slow

POLICY = {"target_rps_per_pod": 1000, "target_lru_age_s": 20, "scale_down_tau_s": 0}
IDLE = ["--rps", "0"]


def test_a_runtime_whose_traffic_stopped_scales_down_though_some_pods_never_served(tmp_path: Path) -> None:
    """pod-0 serves 330 req/s over its 2 models, its cache full; pod-1..3 serve nothing from the start. Then pod-0
    stops too. 20 s later (target_lru_age_s) no model was served within the window: the cache need is 0, the
    requests term 0 (0 req/s against 1000 a pod), so desired = max(min_replicas 1, 0, 0) = 1. Before, the served
    value stayed 4 (the cache proposal held: "per-model use missing on 3 of 4 ready pods") for as long as the
    idle pods stayed idle."""
    with data_path_running(tmp_path, pods=4, rps=330.0, policy=POLICY,
                           modelmesh_args=[[], IDLE, IDLE, IDLE]) as path:
        path.set_load(pod=0, models_loaded=2, cache_used_ratio=1.0)
        path.until_served("modelmesh_desired_replicas", lambda served: served is not None, timeout=30)

        path.set_load(pod=0, requests_per_second=0)
        with contextlib.suppress(AssertionError):  # said below, with what kubectl and /debug show
            poll(lambda: cache_proposal(path) == 0, timeout=60)
        document = debug_runtime(path)
        assert path.value("modelmesh_desired_replicas") == 1.0, (document.get("proposals"), document.get("held"))
        assert cache_proposal(path) == 0, (document.get("proposals"), document.get("held"))


def cache_proposal(path: DataPath) -> object:
    proposals: dict[str, object] = debug_runtime(path).get("proposals") or {}  # type: ignore[assignment]
    return proposals.get("cache")
