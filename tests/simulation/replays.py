"""`simulate --policies fixed` on a trace a test made by following what a refusal said (a rename, the
request-log converter's line), run once for each content: tests of different headers, file names and pipes
follow their refusals to the same rows, and the same run on the same bytes says the same thing every time."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.simulation.runs import SIMULATE

_REPLAYED: dict[bytes, dict[str, Any]] = {}


def replay_once(trace: Path) -> dict[str, Any]:
    """The report.json of `simulate --trace trace --policies fixed` (run as a user does, in the trace's folder),
    made the first time these bytes are replayed."""
    content = trace.read_bytes()
    if content not in _REPLAYED:
        result = subprocess.run([*SIMULATE, "--trace", trace.name, "--out", "out", "--no-plot", "--quiet",
                                 "--policies", "fixed"], cwd=trace.parent, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr
        _REPLAYED[content] = json.loads((trace.parent / "out" / "report.json").read_text())
    return _REPLAYED[content]
