"""`simulate` flags that shape only the skew-aware policy are named on stderr when `--policies` leaves it out.

`simulate --config policy.yaml --policies fixed,mean-hpa` ran without a word, and the user compared the table
with the policy file in mind: the file's `defaults:` shape only skew-aware (and, where `--max-replicas` is not
given, the maxReplicas sized from its `target_lru_age_s`), as `--hpa-behavior` is only skew-aware's HPA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate", "--synthetic", "--models", "5", "--hours", "0.5",
            "--no-plot", "--quiet"]
HPA = "behavior:\n  scaleDown:\n    stabilizationWindowSeconds: 60\n"


def simulate(tmp_path: Path, *flags: str) -> tuple[str, dict[str, object]]:
    (tmp_path / "policy.yaml").write_text("defaults:\n  target_gpu_busy: 0.7\n")
    (tmp_path / "hpa.yaml").write_text(HPA)
    out = tmp_path / "out"
    done = subprocess.run([*SIMULATE, "--out", str(out), *flags], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stderr, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize(("flags", "says"), [
    (["--config", "policy.yaml", "--policies", "fixed,mean-hpa"],
     "simulate: warning: --config policy.yaml does nothing in this run: its defaults: shape the skew-aware policy, "
     "which --policies fixed,mean-hpa leaves out; add skew-aware to --policies, or leave --config out"),
    (["--hpa-behavior", "hpa.yaml", "--policies", "mean-hpa", "--max-replicas", "6"],
     "simulate: warning: --hpa-behavior hpa.yaml does nothing in this run: it is the skew-aware policy's HPA, "
     "which --policies mean-hpa leaves out; add skew-aware to --policies, or leave --hpa-behavior out"),
])
def test_a_skew_aware_only_flag_without_skew_aware_is_named(tmp_path: Path, flags: list[str], says: str) -> None:
    stderr, report = simulate(tmp_path, *flags)
    assert stderr.count(says) == 1, stderr
    assert says.removeprefix("simulate: warning: ") in report["warnings"]  # type: ignore[operator]


def test_a_config_whose_lru_age_sizes_max_replicas_is_not_called_idle(tmp_path: Path) -> None:
    """Its `target_lru_age_s` sizes the default maxReplicas every policy shares: it does something."""
    (tmp_path / "lru.yaml").write_text("defaults:\n  target_lru_age_s: 1200\n")
    stderr, _ = simulate(tmp_path, "--config", "lru.yaml", "--policies", "fixed-max")
    assert "does nothing" not in stderr, stderr


def test_the_flags_with_skew_aware_say_nothing_of_the_kind(tmp_path: Path) -> None:
    stderr, _ = simulate(tmp_path, "--config", "policy.yaml", "--hpa-behavior", "hpa.yaml", "--policies",
                         "mean-hpa,skew-aware")
    assert "does nothing" not in stderr, stderr
