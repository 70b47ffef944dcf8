"""Which pod is needed for the models only it serves, over the whole data path: fake ModelMesh containers with
per-model metrics (`per_model_metrics=true`) → the real exporter (the last-served time of each model) → the
real adapter (the unique-copy need term) → the deletion costs a user reads in /debug."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.e2e.conftest import DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.support.processes import poll

pytestmark = pytest.mark.slow

ONLY_UNIQUE_COPIES = {"need_weight_requests": 0, "need_weight_gpu": 0, "need_weight_cache": 0,
                      "need_weight_unique": 1}
"""Need from the unique copies alone, so that the costs show that term and nothing else."""


def shown(path: DataPath, field: str) -> dict[str, object]:
    """Each pod's `field` as /debug shows it; {} before the first refresh."""
    pods: list[dict[str, object]] = debug_runtime(path).get("pods") or []  # type: ignore[assignment]
    return {str(pod["name"]): pod[field] for pod in pods}


def test_the_pod_alone_serving_its_models_costs_most_and_pods_sharing_theirs_go_first(tmp_path: Path) -> None:
    """pod-0 serves 8 models (the fake's default) no other pod serves; pod-1 and pod-2 both serve the same 8
    (ModelMesh keeps two copies of them). Removing pod-0 makes 8 models cold, removing pod-1 or pod-2 none:
    unique copies 8, 0, 0, scaled by the most (8): needs 1, 0, 0, costs 900, 0, 0. Before the exporter
    published which models a pod served, the term had nothing to read and every pod needed 0 alike (costs 0,
    0, 0): the ReplicaSet's newest-first rule then chose, whatever the pod held."""
    with data_path_running(
        tmp_path, pods=3, rps=30.0, policy=ONLY_UNIQUE_COPIES,
        modelmesh_args=[["--model-prefix", "alone"], ["--model-prefix", "shared"], ["--model-prefix", "shared"]],
    ) as path:
        expected = {"pod-0": 900, "pod-1": 0, "pod-2": 0}
        with contextlib.suppress(AssertionError):  # said below, with the costs seen last
            poll(lambda: shown(path, "deletion_cost") == expected, timeout=30)
        assert shown(path, "deletion_cost") == expected
        # Why, in /debug: the unique copies each pod holds.
        assert shown(path, "unique_models") == {"pod-0": 8, "pod-1": 0, "pod-2": 0}
