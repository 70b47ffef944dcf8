"""A trace too big for the memory left is said early, and running out of it is one line, not a traceback.

A day at 1 s of 500 models (43 million rows) needs several GB; the user waited minutes, then the run was
killed. Run as a user runs it, under a real address-space limit (`ulimit -v`), the one limit a test can give a
process of its own whatever the machine's memory, set a little above what `simulate` takes before it reads.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.simulation.runs import FAILED, HEADER, REPO, SIMULATE, steady

IMPORTS = ("import re, autoscaler.cli, autoscaler.simulation.cli, autoscaler.simulation.cluster, "
           "autoscaler.simulation.engine, autoscaler.simulation.report, autoscaler.simulation.trace, "
           "autoscaler.simulation.trace_buckets, autoscaler.simulation.report_text, "
           "autoscaler.simulation.timeline_plot\n"
           "status = open('/proc/self/status').read()\n"
           "print(*(re.search(rf'{key}:\\s+(\\d+) kB', status).group(1) for key in ('VmPeak', 'VmSize')))")
"""What `simulate` has imported when it reads the trace; prints the process's peak and present size then, in kB
(`simulate` has imported all of it and more by then: it is no smaller)."""


def started() -> tuple[int, int]:
    """The peak and present size (kB) of a process that has imported what `simulate` has when it reads."""
    peak, size = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True,
                                cwd=REPO, timeout=60).stdout.split()
    return int(peak), int(size)


LIMITED = ("import os, resource, sys\n"
           "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))\n"
           "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")
"""Runs the rest of its arguments under an address-space limit of its first, in bytes: `ulimit -v`."""


def test_a_trace_too_big_for_the_memory_left_is_said_from_its_first_rows_then_ends_in_one_line(
        tmp_path: Path) -> None:
    """1.2 million rows (110 bytes a row: 132 MB) with 48 MiB left: the warning names the estimate, the room and
    what to do from the first 65,536 rows, not after the whole file; the run then runs out, said in one line."""
    rows = 1_200_000
    trace = tmp_path / "day.csv"
    with trace.open("w") as fh:
        fh.write(HEADER)
        fh.writelines(f"{1764547200 + i // 500},model-{i % 500:03d},{1 + i % 7}\n" for i in range(rows))
    peak, size = started()
    limit = (peak + 48 * 1024) * 1024
    done = subprocess.run([sys.executable, "-c", LIMITED, str(limit), *SIMULATE[1:], "--trace", str(trace), "--out",
                           str(tmp_path / "out"), "--no-plot", "--quiet"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    lines = done.stderr.splitlines()
    [warned] = [at for at, line in enumerate(lines) if line.startswith("simulate: warning: ")]
    said = lines[warned]
    estimate = re.search(r"about ([\d.]+) million rows from its first 65,536, needs about (\d+) MB", said)
    assert estimate is not None, said
    assert abs(float(estimate.group(1)) - 1.2) <= 0.1 and 110 <= int(estimate.group(2)) <= 150, said
    # The limit less `simulate`'s size when it began reading, which is no smaller than the helper's present size:
    # at most 48 MiB and the helper's peak above its size, and 1 MiB for the allocator's rounding (the bound was
    # 48 MiB alone, 50.3 MB, with 2.6 MB to spare); at least 30 MB: 48 MiB less what `simulate` holds more than
    # the helper by then (its options, the first rows; 2.6 MB when measured, 6 December 2026)
    room = re.search(r"and ([\d.]+) MB is free here", said)
    most = (limit - (size - 1024) * 1024) / 1e6
    assert room is not None and 30 <= float(room.group(1)) <= most, (said, most)
    assert "coarser step" in said and "fewer models" in said, said
    assert done.returncode == 1, done.stderr
    assert lines[warned + 1:] == [f"{FAILED}out of memory (what this machine, the container's memory limit and "
                                  "`ulimit -v` leave): the trace needs more to simulate; give it a coarser step "
                                  "(sum the rows into 10 s or 60 s intervals: pandas df.assign(timestamp_s="
                                  "df.timestamp_s // 60 * 60).groupby(['timestamp_s', 'model'], as_index=False)"
                                  ".sum()), fewer models (the busiest) or a shorter stretch of it, or run it where "
                                  "more memory is free"], done.stderr
    assert not (tmp_path / "out").exists()


def test_a_trace_that_fits_is_read_without_a_word_of_memory(tmp_path: Path) -> None:
    """The same reading with room for it (the machine's own memory): no warning."""
    trace = tmp_path / "day.csv"
    with trace.open("w") as fh:
        fh.write(HEADER)
        fh.writelines(f"{1764547200 + i // 50},model-{i % 50:03d},{1 + i % 7}\n" for i in range(140_000))
    done = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--no-plot", "--quiet",
                           "--policies", "fixed"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "memory" not in done.stderr, done.stderr


def test_the_memory_warning_stays_on_stderr_out_of_the_report_of_a_run_that_finished(tmp_path: Path) -> None:
    """A file whose first rows make it look big (70,000 rows, then 120 MB of blank spreadsheet rows) warned
    under a limit of 200 MiB, and finished: the warning is said, but the report, the same trace's on any
    machine, does not carry what this machine had free."""
    trace = tmp_path / "day.csv"
    with trace.open("w") as fh:
        fh.write(HEADER)
        fh.writelines(f"{1764547200 + i // 100},model-{i % 100:02d},{1 + i % 7}\n" for i in range(70_000))
        fh.writelines(f"{' ' * 10_000},{' ' * 10_000},\n" for _ in range(6_000))
    peak, _ = started()
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", LIMITED, str((peak + 200 * 1024) * 1024), *SIMULATE[1:],
                           "--trace", str(trace), "--out", str(out), "--no-plot", "--quiet", "--policies", "fixed"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "is free here" in done.stderr and "may be killed for memory" in done.stderr, done.stderr
    roomy = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "roomy"), "--no-plot",
                            "--quiet", "--policies", "fixed"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert roomy.returncode == 0 and "is free here" not in roomy.stderr, roomy.stderr
    for name in ("report.json", "report.md"):
        assert steady(out / name) == steady(tmp_path / "roomy" / name), name


def test_a_synthetic_run_out_of_memory_is_told_to_take_fewer_models_or_hours(tmp_path: Path) -> None:
    """`--synthetic` has no trace to make coarser: it was told to sum a trace's rows with pandas; it is told to
    give fewer --models or --hours."""
    peak, _ = started()
    done = subprocess.run([sys.executable, "-c", LIMITED, str((peak + 48 * 1024) * 1024), *SIMULATE[1:],
                           "--synthetic", "--models", "2000", "--hours", "24", "--out", str(tmp_path / "out"),
                           "--no-plot", "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"{FAILED}out of memory (what this machine, the container's memory limit and `ulimit -v` leave): the "
        "synthetic trace of 2,000 models over 24 hours needs more to simulate; give it fewer --models or --hours, "
        "or run it where more memory is free"), done.stderr
    assert not (tmp_path / "out").exists()
