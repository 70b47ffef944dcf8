"""The trace converters refuse as `simulate` does: one line after the command's name, status 2, and a path that
cannot be read or written said before anything is read."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import REPO, run_module

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


DAY = "HashOwner,HashApp,HashFunction,Trigger,1,2,3\no,a,f-a,http,2,0,3\no,b,f-b,timer,1,1,1\n"
"""A per-minute table of three minutes: f-a 5 requests, f-b 3."""
LOG = "timestamp,model\n0,a\n0.5,b\n1,a\n"
"""A request log of three requests."""


def piped(module: str, *args: str | Path, text: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`printf TEXT | python -m module *args`, from the repository root unless `cwd`."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], input=text, capture_output=True,
                          text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize("top", [[], ["--top", "1"]])
def test_minute_table_reads_a_day_piped_in_as_dash(tmp_path: Path, top: list[str]) -> None:
    """`zcat d01.csv.gz | minute_table - --out t.csv` worked, then was refused "-: cannot read: No such file or
    directory" (or read a file named `-` where one was). With --top the day, read twice from a file, is read
    once from the pipe."""
    (tmp_path / "-").write_text("not,a,table\n")  # a file named `-` in the working directory is not read
    out = tmp_path / "t.csv"
    result = piped(MINUTE_TABLE, "-", "--out", out, "--quiet", *top, text=DAY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"-> {out} (60 s intervals)" in result.stderr, result.stderr
    trace = read_csv(out)
    assert trace.total_requests == (5 if top else 8) and len(trace.models) == (1 if top else 2)


def test_minute_table_refuses_a_piped_trace_that_is_not_a_table_and_dash_twice(tmp_path: Path) -> None:
    said = refusal(piped(MINUTE_TABLE, "-", "--out", tmp_path / "t.csv", "--quiet",
                         text="timestamp_s,model,requests\n0,a,1\n"), MINUTE_TABLE)
    assert said.startswith("standard input: not a per-minute table"), said
    said = refusal(piped(MINUTE_TABLE, "-", "-", "--out", tmp_path / "t.csv", "--quiet", text=DAY), MINUTE_TABLE)
    assert said == "- given twice: standard input is read once; save it to a file to give it more than once"
    first = tmp_path / "d01.csv"
    first.write_text(DAY)
    said = refusal(piped(MINUTE_TABLE, first, "-", "--out", tmp_path / "t.csv", "--quiet",
                         text="HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f-a,http,2,0\n"), MINUTE_TABLE)
    assert said.startswith(f"standard input: 2 minute columns, but {first} has 3: "), said


def test_request_log_reads_a_log_piped_in_as_dash(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    result = piped(REQUEST_LOG, "--model-column", "model", "-", "--out", out, "--quiet", text=LOG)
    assert result.returncode == 0, result.stderr
    assert read_csv(out).total_requests == 3
    result = piped(REQUEST_LOG, "m=-", "--out", "-", "--quiet", text=LOG)
    assert result.returncode == 0 and result.stdout.startswith("timestamp_s,model,requests\n"), result.stderr
    said = refusal(piped(REQUEST_LOG, "--model-column", "model", "-", "--out", out, "--quiet",
                         text="timestamp,model\nx,a\n"), REQUEST_LOG)
    assert said.startswith("standard input, line 2: "), said


@pytest.mark.parametrize("module", [REQUEST_LOG, MINUTE_TABLE])
def test_an_out_of_dev_fd_is_written(tmp_path: Path, module: str) -> None:
    """`--out >(gzip > t.gz)` names /dev/fd/N, a directory no file can be made in: refused "cannot write in
    /dev/fd", where it wrote. The pipe here is the parent's, its reading end read after the run."""
    day = tmp_path / "in.csv"
    day.write_text(LOG if module == REQUEST_LOG else DAY)
    given = [f"m={day}"] if module == REQUEST_LOG else [str(day)]
    read, write = os.pipe()
    with os.fdopen(read) as reader:
        result = subprocess.run([sys.executable, "-m", module, *given, "--out", f"/dev/fd/{write}", "--quiet"],
                                capture_output=True, text=True, cwd=REPO, timeout=60, pass_fds=(write,))
        os.close(write)
        written = reader.read()
    assert result.returncode == 0, result.stderr
    assert written.startswith("timestamp_s,model,requests\n"), written


def as_a_user(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m *args` as a user who is not root (root writes wherever it likes): as nobody where the tests
    run as root, with the system's Python (the venv's is under /root) and the venv's packages."""
    command = [sys.executable, "-m", *map(str, args)]
    if os.geteuid() == 0:
        system = Path("/usr/bin/python3")
        assert shutil.which("runuser") and system.exists(), "runuser and /usr/bin/python3 to run as nobody"
        packages = ":".join([str(REPO), *site.getsitepackages()])
        command = ["runuser", "-u", "nobody", "--", "env", f"PYTHONPATH={packages}", str(system), *command[1:]]
    printed = cwd / "stdout"  # theirs to write: a pipe of root's is not, reopened as /dev/stdout
    printed.touch(0o666)
    printed.chmod(0o666)
    with printed.open("w") as stdout:
        return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=60)


@pytest.fixture
def shared_path() -> Iterator[Path]:
    """A directory under /tmp that another user may enter (pytest's tmp_path is under a directory of root's)."""
    made = Path(tempfile.mkdtemp(prefix="convert-"))
    made.chmod(0o755)
    yield made
    for inside in made.rglob("*"):
        inside.chmod(0o755 if inside.is_dir() else 0o644)
    shutil.rmtree(made)


@pytest.mark.parametrize("module", [REQUEST_LOG, MINUTE_TABLE])
def test_an_out_a_user_may_write_is_written_where_they_cannot_make_files(shared_path: Path, module: str) -> None:
    """A file was made and removed in --out's directory to check it: /dev/null, /dev/stdout and an existing
    file the user may write, in a directory they may not add to, were refused "cannot write in ...: Permission
    denied". A new file there is still refused before the input is read."""
    tmp_path = shared_path
    day = tmp_path / "in.csv"
    day.write_text(LOG if module == REQUEST_LOG else DAY)
    given = f"m={day}" if module == REQUEST_LOG else str(day)
    day.chmod(0o644)
    shut = tmp_path / "ro"
    shut.mkdir()
    kept = shut / "t.csv"
    kept.write_text("old\n")
    kept.chmod(0o666)
    shut.chmod(0o755)
    for out in ("/dev/null", "/dev/stdout", kept):
        result = as_a_user(module, given, "--out", out, "--quiet", cwd=tmp_path)
        assert result.returncode == 0, (out, result.stderr)
        if out == "/dev/stdout":
            assert (tmp_path / "stdout").read_text().startswith("timestamp_s,model,requests\n")
    assert kept.read_text().startswith("timestamp_s,model,requests\n")
    kept.chmod(0o644)
    kept.write_text("old\n")
    for out, why in ((kept, f"--out {kept}: cannot write: Permission denied; give a path you can write"),
                     (shut / "new.csv", f"--out {shut / 'new.csv'}: cannot make a file in {shut}: Permission "
                                        "denied; give a path you can write")):
        said = refusal(as_a_user(module, given, "--out", out, "--quiet", cwd=tmp_path), module)
        assert said == why, said
    assert kept.read_text() == "old\n"  # not truncated by the check


@pytest.mark.parametrize(("module", "given"), [(REQUEST_LOG, ["--model-column", "model", "-"]), (MINUTE_TABLE, ["-"])])
def test_dash_with_a_terminal_for_standard_input_is_refused_not_waited_on(tmp_path: Path, module: str,
                                                                          given: list[str]) -> None:
    """`-` typed with nothing piped in: the converter would wait, silent, for a CSV to be typed."""
    controller, terminal = os.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", module, *given, "--out", str(tmp_path / "t.csv"), "--quiet"],
                                stdin=terminal, capture_output=True, text=True, cwd=REPO, timeout=20)
    finally:
        os.close(terminal)
        os.close(controller)
    said = refusal(result, module)
    assert said.startswith("-: standard input is a terminal: pipe the file into it"), said


def test_minute_table_writes_standard_output_for_out_dash(tmp_path: Path) -> None:
    """`--out -` wrote a file named `-` in the working directory, where request_log's writes standard output."""
    day = tmp_path / "d.csv"
    day.write_text(DAY)
    result = subprocess.run([sys.executable, "-m", MINUTE_TABLE, str(day), "--out", "-", "--quiet"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "-").exists()
    (tmp_path / "t.csv").write_text(result.stdout)
    assert read_csv(tmp_path / "t.csv").total_requests == 8
    assert "2 models -> standard output (60 s intervals)" in result.stderr, result.stderr


@pytest.mark.parametrize(("module", "given", "text", "requests"),
                         [(REQUEST_LOG, ["--model-column", "model", "./-"], LOG, 3),
                          (REQUEST_LOG, ["m=./-"], LOG, 3), (MINUTE_TABLE, ["./-"], DAY, 8)])
def test_a_file_named_dash_is_read_as_dot_slash_dash_not_standard_input(tmp_path: Path, module: str,
                                                                        given: list[str], text: str,
                                                                        requests: int) -> None:
    """Only the argument `-` is standard input: `./-` names the file `-`, which request_log read as standard
    input once `Path('./-')` became `-` ("standard input: empty file", or whatever was piped in, silently)."""
    (tmp_path / "-").write_text(text)
    out = tmp_path / "t.csv"
    result = piped(module, *given, "--out", out, "--quiet", text="", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert read_csv(out).total_requests == requests


def test_minute_tables_out_dash_is_standard_output_not_a_file_named_dash(tmp_path: Path) -> None:
    """`--out -` was compared with the days read as the file `-` in the working directory: where the old
    `--out -` had written one, `cat d01.csv | minute_table - --out -` was refused "--out - is -, one of the
    files read", and `minute_table d01.csv --out -` "--out - is d01.csv" where `-` was a link to it."""
    day = tmp_path / "d01.csv"
    day.write_text(DAY)
    os.link(day, tmp_path / "-")
    for given, text in (("-", DAY), (str(day), "")):
        result = piped(MINUTE_TABLE, given, "--out", "-", "--quiet", text=text, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "2 models -> standard output" in result.stderr, result.stderr
        (tmp_path / "t.csv").write_text(result.stdout)
        assert read_csv(tmp_path / "t.csv").total_requests == 8


def test_request_log_refuses_to_write_over_a_log_it_reads(tmp_path: Path) -> None:
    """`request_log a=app.log --out app.log` (or the log by another path: a symlink) replaced the user's log with
    the trace made from it; minute_table refused that of a day it reads. Now refused before anything is read, the
    log untouched."""
    log = tmp_path / "app.log"
    log.write_text(LOG)
    (tmp_path / "same.log").symlink_to(log)
    for out in (log, tmp_path / "same.log"):
        said = refusal(run_module(REQUEST_LOG, f"a={log}", "--out", out, "--quiet"), REQUEST_LOG)
        assert said == f"--out {out} is {log}, one of the files read: give the output another name", said
    assert log.read_text() == LOG


@pytest.mark.parametrize("top", [[], ["--top", "1"]])
@pytest.mark.parametrize(("pipe", "named"), [("", "<(cat day.csv)"), ("cat day.csv | ", "/dev/stdin")])
def test_minute_table_reads_a_day_piped_in_by_path(tmp_path: Path, top: list[str], pipe: str, named: str) -> None:
    """`minute_table <(zcat d01.csv.gz)` or `... | minute_table /dev/stdin`: the table check read the pipe's
    header, and the day read after it was "not a per-minute table". A path that is no regular file is read once,
    as `-` is."""
    (tmp_path / "day.csv").write_text(DAY)
    out = tmp_path / "t.csv"
    result = subprocess.run(["bash", "-c", f'{pipe}"$0" -m {MINUTE_TABLE} {named} --out t.csv --quiet {" ".join(top)}',
                             sys.executable], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    trace = read_csv(out)
    assert trace.total_requests == (5 if top else 8) and len(trace.models) == (1 if top else 2)
