"""The request-log converter's progress bar as a user sees it: on a terminal it moves while a big log is read
(3 million requests took half a minute without a word), in a log file it is one finished line, `--quiet` none.
The bar is `simulate`'s own (progress_bar.ProgressBar), so it reads as `simulate`'s does."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from autoscaler.simulation.progress_bar import ProgressBar
from autoscaler.simulation.trace import read_csv
from autoscaler.simulation.trace_file import PROGRESS_ROWS
from tests.simulation.runs import FAILED, REPO, convert, trickled, write_trace

CONVERT = [sys.executable, "-m", "autoscaler.simulation.request_log"]


def big_log(tmp_path: Path, files: int = 2) -> list[str]:
    """MODEL=FILE arguments of `files` logs of a request a millisecond, together several progress reports'
    worth of rows (`PROGRESS_ROWS` each)."""
    rows = 2 * PROGRESS_ROWS
    inputs = []
    for i in range(files):
        log = tmp_path / f"m{i}.csv"
        log.write_text("timestamp\n" + "".join(f"{1_700_000_000 + n / 1000:.3f}\n" for n in range(rows)))
        inputs.append(f"m{i}={log}")
    return inputs


def on_a_terminal(args: list[str], command: list[str] = CONVERT) -> tuple[int, str]:
    """Run the converter (or `command`) with its stderr on a pseudo-terminal, as in a user's shell; (status, what it
    showed)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(command + args, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=follower)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout=120), shown.decode()


def test_a_big_log_shows_the_reading_bar_move_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "trace.csv"
    status, shown = on_a_terminal([*big_log(tmp_path), "--out", str(out)])
    assert status == 0, shown
    percents = [int(p) for p in re.findall(r"reading\s+\[[#.]+\]\s+(\d+)%", shown)]
    assert percents[-1] == 100
    assert any(0 < p < 100 for p in percents), shown  # drawn while reading, not only once done
    assert percents == sorted(percents)  # over both files' bytes: the second file does not start it again
    assert f"{4 * PROGRESS_ROWS} requests of 2 models" in shown
    assert read_csv(out).total_requests == 4 * PROGRESS_ROWS


def test_a_log_file_gets_the_finished_bar_alone_and_quiet_none(tmp_path: Path) -> None:
    inputs = big_log(tmp_path, files=1)
    logged = convert(*inputs, "--out", str(tmp_path / "a.csv"), timeout=120)
    assert logged.returncode == 0, logged.stderr
    lines = [line for line in logged.stderr.splitlines() if line]  # the bar's "\r" read as a line end
    assert len(lines) == 2 and re.fullmatch(r"reading\s+\[#+\] 100%\s+\d+\.\ds", lines[0]), logged.stderr
    assert lines[1].startswith(f"{2 * PROGRESS_ROWS} requests of 1 models")
    quiet = convert(*inputs, "--out", str(tmp_path / "b.csv"), "--quiet", timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.startswith(f"{2 * PROGRESS_ROWS} requests of 1 models"), quiet.stderr
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def test_simulate_reading_a_trace_finishes_its_bar_once(tmp_path: Path) -> None:
    """A trace of exactly one report's rows: the reader reads ahead of the rows it parses, so the last report
    came at the file's last byte and the bar finished twice ("reading ... 100%" on two lines of a log)."""
    path = write_trace(tmp_path, "".join(f"{60 * i},m{i % 7},1\n" for i in range(PROGRESS_ROWS)))
    log = io.StringIO()
    read_csv(path, ProgressBar("reading", log))
    assert log.getvalue().count("100%") == 1, log.getvalue()


def test_an_error_after_a_partly_drawn_bar_starts_its_own_line(tmp_path: Path) -> None:
    """A bad row past the first progress report: the error printed after the bar's "\r...  40%" was glued to
    it ("reading [####......]  40%   0.1serror: ..."), in both the converter and simulate."""
    rows = "".join(f"{1_700_000_000 + n / 1000:.3f}\n" for n in range(3 * PROGRESS_ROWS // 2))
    log = tmp_path / "m.csv"
    log.write_text("timestamp\n" + rows + "yesterday\n" + rows)
    status, shown = on_a_terminal([f"m={log}", "--out", str(tmp_path / "out.csv")])
    assert status == 2 and re.search(r"\d%", shown), shown  # failed, after a bar drawn short of its end
    assert re.search(r"(^|\n)python -m autoscaler.simulation.request_log: error: ", shown), shown
    rows = "".join(f"{60 * i},m{i % 7},1\n" for i in range(3 * PROGRESS_ROWS // 2))
    trace = write_trace(tmp_path, rows + "later,m1,1\n")
    status, shown = on_a_terminal(["simulate", "--trace", str(trace), "--out", str(tmp_path / "report")],
                                  [sys.executable, "-m", "autoscaler.cli"])
    assert status == 2 and re.search(r"\d%", shown), shown
    assert re.search(f"(^|\n){FAILED}", shown), shown


def test_a_log_piped_in_by_its_path_is_converted(tmp_path: Path) -> None:
    """`python -m autoscaler.simulation.request_log m=/dev/stdin < <(zcat log.gz)`: the converter read two bytes
    and sought back to the start to tell gzip, which a pipe cannot ("File or stream is not seekable"), and
    asked a pipe where it was for the bar; a pipe's log is read as a file's, the bar left at its start."""
    import gzip

    rows = 2 * PROGRESS_ROWS
    text = "timestamp\n" + "".join(f"{1_700_000_000 + n / 1000:.3f}\n" for n in range(rows))
    for body in (text.encode(), gzip.compress(text.encode())):
        out = tmp_path / "trace.csv"
        done = subprocess.run([*CONVERT, "m=/dev/stdin", "--out", str(out)], cwd=REPO, input=body,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        assert read_csv(out).total_requests == rows
    # its first byte alone, a moment before the rest (a slow writer): gzip was told by one byte, and read as text
    done = trickled([*CONVERT, "m=/dev/stdin", "--out", str(out)], gzip.compress(text.encode()))
    assert done.returncode == 0, done.stderr.decode()
    assert read_csv(out).total_requests == rows
