"""Stopping `simulate` part way: one line, the signal's status, and no empty `--out` directory left behind.

A run stopped by SIGTERM (`timeout 60 modelmesh-autoscaler simulate ...`, a CI job cancelled, a pod deleted)
ended with status 143 and no word, and left the `--out` directory it had made, empty, where a script then found
no report; Ctrl-C left it too. A directory the user made, or one holding files, is theirs and stays.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.cli import build_parser, command_parser
from autoscaler.simulation.cli import run

SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate"]
LONG_RUN = ["--synthetic", "--models", "200", "--hours", "24", "--no-plot"]


def stop_while_simulating(out: Path, signum: int) -> subprocess.CompletedProcess[str]:
    """Start a run of several policies, send `signum` once the first has finished (its bar, on stderr, at 100%:
    the run is simulating the next), and wait for the end."""
    process = subprocess.Popen([*SIMULATE, *LONG_RUN, "--out", str(out)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "100%" in line:
            break
    assert process.poll() is None, "".join(seen)
    os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, "".join(seen) + stderr)


@pytest.mark.parametrize(("signum", "status", "line"), [(signal.SIGTERM, 143, "terminated."),
                                                         (signal.SIGINT, 130, "interrupted.")])
def test_a_stopped_run_says_so_and_leaves_no_empty_directory(tmp_path: Path, signum: int, status: int,
                                                            line: str) -> None:
    out = tmp_path / "report"
    run = stop_while_simulating(out, signum)
    assert run.returncode == status, run.stderr
    assert run.stderr.strip().splitlines()[-1] == line, run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists(), list(out.iterdir())


def test_a_directory_the_user_made_stays_even_empty(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    run = stop_while_simulating(out, signal.SIGTERM)
    assert run.returncode == 143, run.stderr
    assert out.is_dir() and not list(out.iterdir())


STOP_WHILE_PLOTTING = """
import os, signal, sys, time
import autoscaler.simulation.timeline_plot as timeline_plot

def plot(*args, **kwargs):  # the report's text files written (or not), the plot under way: Ctrl-C
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

timeline_plot.plot_timeline = plot
from autoscaler.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("earlier_run", [True, False])
def test_ctrl_c_while_the_files_are_written_leaves_an_earlier_report_whole_or_nothing(tmp_path: Path,
                                                                                     earlier_run: bool) -> None:
    """Ctrl-C while the plot was drawn left this run's report.json and report.md beside the earlier run's
    timeline.png, read as one run's, or in a new --out a report without its plot. The outputs now appear
    together or not at all: the earlier run's files stay as they were, and a new directory goes."""
    out = tmp_path / "report"
    earlier = {name: f"earlier {name}" for name in ("report.json", "report.md", "timeline.png")}
    if earlier_run:
        out.mkdir()
        for name, text in earlier.items():
            (out / name).write_text(text)
    run = subprocess.run([sys.executable, "-c", STOP_WHILE_PLOTTING, "simulate", "--synthetic", "--models", "5",
                          "--hours", "1", "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "interrupted.", run.stderr
    if earlier_run:
        assert {path.name: path.read_text() for path in out.iterdir()} == earlier
    else:
        assert not out.exists(), list(out.iterdir())


def test_an_error_while_the_files_are_written_leaves_the_earlier_report_whole(tmp_path: Path) -> None:
    """A plot that fails (here a KeyboardInterrupt raised where no handler of ours runs: a test calling the run)
    leaves the earlier run's files as they were and nothing half-written beside them."""
    out = tmp_path / "report"
    out.mkdir()
    earlier = {name: f"earlier {name}" for name in ("report.json", "report.md", "timeline.png")}
    for name, text in earlier.items():
        (out / name).write_text(text)
    args = command_parser(build_parser(), "simulate").parse_args(
        ["--synthetic", "--models", "5", "--hours", "1", "--out", str(out), "--quiet"])

    def plot(*_: object) -> None:
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autoscaler.simulation.timeline_plot.plot_timeline", plot)
        with pytest.raises(KeyboardInterrupt):
            run(args)
    assert {path.name: path.read_text() for path in out.iterdir()} == earlier


def test_output_piped_into_a_reader_that_stops_ends_quietly_with_the_closed_pipe_status(tmp_path: Path) -> None:
    """`simulate ... | head -1` (or `| true`): the reader gone, the table's print raised BrokenPipeError, a
    traceback and status 1 though the report was written. Now no word and status 141 (128 + SIGPIPE), as `yes |
    head` ends; the report files are there."""
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,600\n60,a,1200\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has stopped before anything is written
    try:
        result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--no-plot",
                                 "--quiet"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (128 + signal.SIGPIPE, "")
    assert (tmp_path / "out" / "report.json").is_file() and (tmp_path / "out" / "report.md").is_file()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_removes_the_parent_directories_it_made_for_out(tmp_path: Path, signum: int) -> None:
    """`--out runs/today/report` where runs/ did not exist: Ctrl-C removed report/ and left runs/today/, empty."""
    out = tmp_path / "runs" / "today" / "report"
    run = stop_while_simulating(out, signum)
    assert run.returncode == 128 + signum, run.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))


def test_a_stopped_run_leaves_the_parents_that_were_there(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    run = stop_while_simulating(tmp_path / "runs" / "today" / "report", signal.SIGINT)
    assert run.returncode == 130, run.stderr
    assert [path.name for path in tmp_path.rglob("*")] == ["runs"]
