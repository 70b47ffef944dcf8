"""`modelmesh-autoscaler simulate` run as a user runs it, in a subprocess, and the report it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate"]


def simulate(tmp_path: Path, trace: Path, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`simulate --trace trace --out tmp_path/out --no-plot --quiet *flags`."""
    return subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--no-plot", "--quiet",
                           *flags], capture_output=True, text=True, timeout=timeout)


def report(tmp_path: Path) -> dict[str, Any]:
    """The report.json that `simulate` wrote."""
    loaded: dict[str, Any] = json.loads((tmp_path / "out" / "report.json").read_text())
    return loaded
