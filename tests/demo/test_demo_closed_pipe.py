"""`./run demo | head -3`: a reader that stops early, as `head` does, or `less` left with `q`.

The demo ended in a BrokenPipeError traceback from its next print (`first_value`'s line with `| head -3`, a pod's
table row with `| head -20`) and status 1, and kept its /tmp/modelmesh-demo-* directory as if it had failed.
`simulate` ends quietly with status 141 then (128 + SIGPIPE, as `yes | head` does; docs/configuration.md), and
the demo now does the same: no word, its processes stopped, its directory removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_demo import processes_using
from tests.support.processes import poll
from tests.support.terminal import REPO

pytestmark = pytest.mark.slow

PIPED_INTO_HEAD = '"$@" 2>"$ERR" | head -"$LINES_READ"; echo "demo status ${PIPESTATUS[0]}"'
"""The demo as a user pipes it into `head`, in a shell that reports the demo's own status (not head's)."""


@pytest.mark.parametrize("lines", [3, 20])  # gone during the wait for the first value; during the first table
def test_a_reader_that_stops_early_ends_the_demo_quietly_with_status_141_and_leaves_nothing(
        tmp_path: Path, lines: int) -> None:
    err = tmp_path / "stderr"
    run = subprocess.run(["bash", "-c", PIPED_INTO_HEAD, "bash", sys.executable, "-m", "autoscaler.cli", "demo",
                          "--duration", "30"], capture_output=True, text=True, cwd=REPO, timeout=240,
                         env={**os.environ, "TMPDIR": str(tmp_path), "ERR": str(err),
                              "LINES_READ": str(lines), "PYTHONPATH": str(REPO)})
    *shown, status = run.stdout.splitlines()
    assert len(shown) == lines, run.stdout
    assert shown[0].startswith("demo: "), run.stdout
    assert status == "demo status 141", (run.stdout, err.read_text())
    assert err.read_text() == "", "no word on a reader that has gone"
    assert list(tmp_path.glob("modelmesh-demo-*")) == [], "its directory removed: it did not fail"
    poll(lambda: processes_using(str(tmp_path)) == "", timeout=30)
