"""A mistake in `simulate`'s policy file or HPA file is told before numpy is imported: numpy and the
simulator's modules (0.17 CPU-s of such a refusal's 0.39) came first, and where the `simulate` extra is not
installed the user was sent to install it before being told the file they gave was wrong."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.simulation.runs import FAILED, SIMULATE, write_trace


def without_numpy(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`simulate` where `import numpy` fails as it does without the `simulate` extra."""
    shadow = tmp_path / "no-numpy" / "numpy"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    trace = write_trace(tmp_path, "0,a,60\n60,a,60\n")
    path = os.pathsep.join([str(shadow.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--no-plot", "--quiet",
                           *flags], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": path})


def test_a_policy_file_or_hpa_file_mistake_is_told_before_numpy_is_needed(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("defaults: {scale_down_tau_s: 1e300}\n")
    (tmp_path / "hpa.yaml").write_text("\tbehavior:\n")
    result = without_numpy(tmp_path, "--config", str(tmp_path / "policy.yaml"))
    assert result.stderr == (f"{FAILED}{tmp_path / 'policy.yaml'}: defaults: scale_down_tau_s must be 0 to 86400 "
                             "seconds (0: fall at once), got 1e+300\n"), result.stderr
    result = without_numpy(tmp_path, "--hpa-behavior", str(tmp_path / "hpa.yaml"))
    assert result.stderr.startswith(f"{FAILED}{tmp_path / 'hpa.yaml'}:1:1: not valid YAML: "), result.stderr
    result = without_numpy(tmp_path)  # the files right: the run needs numpy, and says how to get it
    assert result.returncode == 2 and result.stderr.startswith(f"{FAILED}needs numpy: pip install "), result.stderr
