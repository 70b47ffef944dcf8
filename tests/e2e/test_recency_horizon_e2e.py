"""An exporter whose `--model-recency-horizon` is shorter than the policy's `target_lru_age_s`, over the whole data
path: fake ModelMesh with per-model metrics → the real exporter → the real adapter, read in /debug and its log.

The cache need counts the copies served within `target_lru_age_s`, from the exporters' last-served times, which an
exporter keeps for its horizon only. Before, a horizon shorter than that window cut the count to the horizon,
silently: once the load stopped for longer than the horizon, /debug's cache proposal fell 1 → 0 and no line said
why. Now the exporter publishes its horizon, /debug warns naming both settings, the log says it once, and the
cache term is held (may rise, not fall) while the horizon is short.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.e2e.conftest import DataPath, data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.support.processes import poll

pytestmark = pytest.mark.slow

HORIZON_S = 2
"""The exporter's horizon, scaled down from its hour; the policy's `target_lru_age_s` is its default, 600."""


def shown(path: DataPath) -> dict[str, object]:
    """What /debug shows of the cache need: the cache proposal, each pod's unique copies, the warnings."""
    document = debug_runtime(path)
    pods: list[dict[str, object]] = document.get("pods") or []  # type: ignore[assignment]
    proposals: dict[str, object] = document.get("proposals") or {}  # type: ignore[assignment]
    return {"cache": proposals.get("cache"), "unique_models": [pod["unique_models"] for pod in pods],
            "warnings": document.get("warnings", [])}


def horizon_lines(path: DataPath) -> list[str]:
    return [line for line in path.adapter_log().splitlines() if "--model-recency-horizon" in line]


def test_a_horizon_below_target_lru_age_is_warned_about_and_cannot_lower_the_cache_need(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=1, rps=50.0, policy={"scale_down_tau_s": 0},
                           exporter_args=[["--model-recency-horizon", str(HORIZON_S)]]) as path:
        # Serving: the fake's 8 models fill one pod's worth of the cache need.
        with contextlib.suppress(AssertionError):  # said below, with what /debug showed last
            poll(lambda: shown(path)["unique_models"] == [8] and shown(path)["cache"] == 1, timeout=30)
        serving = shown(path)
        assert serving["cache"] == 1 and serving["unique_models"] == [8], serving
        warnings = [str(warning) for warning in serving["warnings"]]  # type: ignore[attr-defined]
        assert any(
            "--model-recency-horizon" in warning and "EXPORTER_MODEL_RECENCY_HORIZON" in warning
            and "target_lru_age_s" in warning and f"{HORIZON_S} s" in warning and "600 s" in warning
            for warning in warnings), warnings

        # The load stops: after the horizon the exporter has dropped every model, served 2 s ago or 20.
        path.set_load(requests_per_second=0)
        with contextlib.suppress(AssertionError):
            poll(lambda: shown(path)["unique_models"] == [0], timeout=30)
        idle = shown(path)
        assert idle["unique_models"] == [0], idle
        # The models served seconds ago are still "in use within 600 s": the cache need is held, not dropped.
        assert idle["cache"] == 1, idle
        assert idle["warnings"] == serving["warnings"]

        # Said once in the log, naming both settings and what to write, however many refreshes it lasts.
        lines = horizon_lines(path)
        assert len(lines) == 1, lines
        assert "WARNING" in lines[0] and "target_lru_age_s" in lines[0], lines
