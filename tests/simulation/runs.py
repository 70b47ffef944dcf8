"""`modelmesh-autoscaler simulate` and the trace converters run as a user runs them, in a subprocess, the trace
files fed to them and the report `simulate` writes."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate"]
HEADER = "timestamp_s,model,requests\n"
FAILED = "modelmesh-autoscaler simulate: error: "
"""How every error of `simulate` starts, its flags' (argparse's) and its inputs' alike."""
CONVERT_FAILED = "python -m autoscaler.simulation.request_log: error: "
"""How every refusal of the request-log converter starts (status 2, as `simulate`'s), flags' and inputs' alike."""
ROUND = re.compile(r"round every timestamp (down )?to (?:the|a) (\d+) s step")
"""A refusal's rounding: "down" (`.dt.floor`) or not (`.dt.round`), and the step."""


def write_trace(tmp_path: Path, rows: str) -> Path:
    """tmp_path/trace.csv: the header, then `rows`."""
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + rows)
    return trace


def simulate(tmp_path: Path, trace: Path, *flags: str, timeout: float = 120,
             plot: bool = False) -> subprocess.CompletedProcess[str]:
    """`simulate --trace trace --out tmp_path/out --no-plot --quiet *flags` (without --no-plot if `plot`)."""
    return subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"),
                           *([] if plot else ["--no-plot"]), "--quiet", *flags],
                          capture_output=True, text=True, timeout=timeout)


def report(tmp_path: Path) -> dict[str, Any]:
    """The report.json that `simulate` wrote."""
    loaded: dict[str, Any] = json.loads((tmp_path / "out" / "report.json").read_text())
    return loaded


def run_module(module: str, *args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m module *args` from the repository root, its output captured."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def convert(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The request-log converter, `python -m autoscaler.simulation.request_log *args`."""
    return run_module("autoscaler.simulation.request_log", *args, timeout=timeout)


def rounded(text: str, said: re.Match[str]) -> str:
    """The rows `text` with every timestamp rounded (or floored, "down") to the step a refusal names (`ROUND`),
    summed by timestamp and model, as its pandas line does: `.dt.round` rounds half to even (a row at :05 to :00,
    one at :15 to :20), as Python's `round` does."""
    step = int(said.group(2))
    summed: dict[tuple[int, str], float] = {}
    for row in text.splitlines():
        t, model, requests = row.split(",")
        at = step * (math.floor(float(t) / step) if said.group(1) else round(float(t) / step))
        summed[(at, model)] = summed.get((at, model), 0.0) + float(requests)
    return "".join(f"{t},{model},{requests:g}\n" for (t, model), requests in sorted(summed.items()))


def trickled(command: list[str], body: bytes) -> subprocess.CompletedProcess[bytes]:
    """`command` with `body` on its standard input, its first byte alone a moment before the rest (a slow writer:
    a download, `ssh host zcat`), so that the first read of the pipe brings one byte."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(body[:1])
    process.stdin.flush()
    time.sleep(0.5)
    out, err = process.communicate(body[1:], timeout=180)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def steady(report: Path) -> str:
    """A report's text (report.json or report.md) without what differs run to run: each policy's wall time, and
    the folder it was written to."""
    return re.sub(r"(wall_seconds\W+)[\d.e-]+", r"\1", report.read_text()).replace(str(report.parent), "")
