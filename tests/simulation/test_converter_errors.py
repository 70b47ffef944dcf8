"""The trace converters refuse as `simulate` does: one line after the command's name, status 2, and a path that
cannot be read or written said before anything is read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.simulation.runs import run_module

REQUEST_LOG = "autoscaler.simulation.request_log"
MINUTE_TABLE = "autoscaler.simulation.minute_table"


def refusal(result: subprocess.CompletedProcess[str], module: str) -> str:
    """The one line a refused run printed, after `python -m MODULE: error: `; its status was 2."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    prefix = f"python -m {module}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0].removeprefix(prefix)


@pytest.mark.parametrize(("module", "given"), [(REQUEST_LOG, "m={}"), (MINUTE_TABLE, "{}")])
def test_a_missing_input_is_one_line_naming_it_in_the_os_words(tmp_path: Path, module: str, given: str) -> None:
    """It was `error: [Errno 2] No such file or directory: '/x.csv'`, status 1."""
    missing = tmp_path / "nowhere.csv"
    said = refusal(run_module(module, given.format(missing), "--out", tmp_path / "t.csv", "--quiet"), module)
    assert said == f"{missing}: cannot read: No such file or directory; check the path"
    said = refusal(run_module(module, given.format(tmp_path), "--out", tmp_path / "t.csv", "--quiet"), module)
    assert said == f"{tmp_path}: cannot read: it is a directory; give the CSV file in it"
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize(("module", "given"), [(REQUEST_LOG, "m={}"), (MINUTE_TABLE, "{}")])
def test_an_out_that_cannot_be_written_is_refused_before_the_input_is_read(tmp_path: Path, module: str,
                                                                          given: str) -> None:
    """`--out /nonexistent/dir/x.csv` was found after the whole input was read (31 s for a 105 MB log). The input
    here is a named pipe nobody writes: a converter that opens it before checking `--out` hangs there."""
    pipe = tmp_path / "log.csv"
    os.mkfifo(pipe)
    out = tmp_path / "no" / "dir" / "t.csv"
    said = refusal(run_module(module, given.format(pipe), "--out", out, "--quiet", timeout=20), module)
    assert said == f"--out {out}: no directory {out.parent}; make it first (mkdir -p {out.parent}) or give another path"
    said = refusal(run_module(module, given.format(pipe), "--out", tmp_path, "--quiet", timeout=20), module)
    assert said == f"--out {tmp_path}: it is a directory; give a file name ({tmp_path / 'trace.csv'})"


def test_a_data_error_is_one_line_and_status_2(tmp_path: Path) -> None:
    """Epoch milliseconds without `--timestamp-unit ms`: the message said what to add, but the status was 1."""
    log = tmp_path / "access.csv"
    log.write_text("timestamp,model\n1733011200000,a\n1733011200500,b\n")
    said = refusal(run_module(REQUEST_LOG, "--model-column", "model", log, "--out", tmp_path / "t.csv", "--quiet"),
                   REQUEST_LOG)
    assert said.endswith("add --timestamp-unit ms"), said
    log.write_text("timestamp,model\n")
    said = refusal(run_module(REQUEST_LOG, "--model-column", "model", log, "--out", tmp_path / "t.csv", "--quiet"),
                   REQUEST_LOG)
    assert said == "no requests in the inputs"
