"""A mistake in `simulate`'s policy file, HPA file or trace file's header is told before numpy is imported:
numpy and the simulator's modules (0.17 CPU-s of such a refusal's 0.39) came first, and where the `simulate`
extra is not installed the user was sent to install it before being told the file they gave was wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simulation.runs import CONVERT_FAILED, FAILED, REPO, SIMULATE, write_trace


def without_numpy(tmp_path: Path, *flags: str, trace: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`simulate --trace trace` (a trace of two rows if None) where `import numpy` fails as it does without the
    `simulate` extra."""
    trace = trace or write_trace(tmp_path, "0,a,60\n60,a,60\n")
    return subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--no-plot", "--quiet",
                           *flags], capture_output=True, text=True, timeout=60, env=numpy_missing(tmp_path))


def numpy_missing(tmp_path: Path) -> dict[str, str]:
    """The environment of a process where `import numpy` fails as it does without the `simulate` extra."""
    shadow = tmp_path / "no-numpy" / "numpy"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent),
                                                         *filter(None, [os.environ.get("PYTHONPATH")])])}


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


@pytest.mark.parametrize(("body", "said"), [
    (b"time,model,count\n0,a,60\n", "line 1: expected the header timestamp_s,model,requests"),
    (b"", "empty file; expected the header timestamp_s,model,requests"),
    (b"\xfd7zXZ\x00\x00", "an xz file, not CSV: unpack it first"),
    ("timestamp_s,model,requests\n0,café,60\n".encode("cp1252"), "line 2: not UTF-8 text"),
], ids=["header", "empty", "xz", "code-page"])
def test_a_trace_file_refused_by_its_packing_text_or_header_is_told_before_numpy_is_needed(
        tmp_path: Path, body: bytes, said: str) -> None:
    """The file's first bytes and header row say these; its rows, and numpy, are not needed to."""
    trace = tmp_path / "given.csv"
    trace.write_bytes(body)
    result = without_numpy(tmp_path, trace=trace)
    assert result.returncode == 2 and result.stderr.startswith(f"{FAILED}{trace}: {said}"), result.stderr


def test_a_trace_refused_by_a_row_still_says_how_to_get_numpy(tmp_path: Path) -> None:
    """Rows are read once, by the reader numpy comes with: a bad row is told where numpy is installed
    (tests/simulation/test_cli.py), and here, as any run, the run asks for numpy first."""
    result = without_numpy(tmp_path, trace=write_trace(tmp_path, "0,a,60\n60,a,lots\n"))
    assert result.returncode == 2 and result.stderr.startswith(f"{FAILED}needs numpy: pip install "), result.stderr


def test_a_request_log_the_converter_cannot_read_is_told_before_numpy_is_needed(tmp_path: Path) -> None:
    """The converter imported numpy (to bin the requests) before reading a line: a log without its time column
    cost numpy's import, and without the `simulate` extra was a traceback."""
    log = tmp_path / "log.csv"
    log.write_text("when,model\n12:00,a\n")
    result = subprocess.run([sys.executable, "-m", "autoscaler.simulation.request_log", "--model-column", "model",
                             str(log), "--out", str(tmp_path / "trace.csv"), "--quiet"],
                            capture_output=True, text=True, timeout=60, cwd=REPO, env=numpy_missing(tmp_path))
    assert result.returncode == 2 and result.stderr.startswith(f"{CONVERT_FAILED}{log}: "), result.stderr
    assert "timestamp" in result.stderr, result.stderr
