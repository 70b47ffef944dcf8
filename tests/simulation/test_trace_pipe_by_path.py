"""A trace piped in under a file's name (`--trace /dev/stdin`, bash's `--trace <(zcat day.csv.gz)`, a FIFO) is
read as `--trace -` reads one.

Such a path opens a pipe whose size reads 0 and which cannot say where it is: over 65,536 rows the run ended
`cannot read trace: Illegal seek`, exit status 2, where the progress bar or the memory estimate asked it.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.simulation.runs import HEADER, SIMULATE, steady, trickled

ROWS = 70_000
"""Past the 65,536 rows at which the bar is drawn and the file's rows are estimated."""


def _body(packed: bool) -> bytes:
    """ROWS rows of 100 models at 1 s, gzip'd where `packed` (as `zcat` would be left out)."""
    text = HEADER + "".join(f"{1764547200 + i // 100},model-{i % 100:02d},{1 + i % 5}\n" for i in range(ROWS))
    return gzip.compress(text.encode()) if packed else text.encode()


def _run(out: Path, trace: str, body: bytes | None, *flags: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*SIMULATE, "--trace", trace, "--out", str(out), "--no-plot", "--policies", "fixed",
                           *flags], input=body, capture_output=True, timeout=180)


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "bar"])
@pytest.mark.parametrize("packed", [False, True], ids=["csv", "gzip"])
def test_a_pipe_named_by_its_path_is_read_as_standard_input_is(tmp_path: Path, packed: bool, quiet: bool) -> None:
    """`zcat big.csv.gz | simulate --trace /dev/stdin` gives the report `--trace -` gives, exit status 0."""
    body = _body(packed)
    flags = ["--quiet"] if quiet else []
    by_dash = _run(tmp_path / "dash", "-", body, *flags)
    assert by_dash.returncode == 0, by_dash.stderr.decode()
    by_path = _run(tmp_path / "path", "/dev/stdin", body, *flags)
    assert by_path.returncode == 0, by_path.stderr.decode()
    assert "Illegal seek" not in by_path.stderr.decode()
    dash, path = (steady(tmp_path / name / "report.json") for name in ("dash", "path"))
    assert path == dash.replace('"standard input"', '"/dev/stdin"')


def test_a_named_pipe_is_read_as_standard_input_is(tmp_path: Path) -> None:
    """A FIFO (what `--trace <(zcat day.csv.gz)` opens, by /dev/fd/63) written by another process as it is read."""
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    body = _body(packed=True)

    def feed() -> None:
        with fifo.open("wb") as fh:
            fh.write(body)

    # A daemon: a simulate that never opened the FIFO leaves it blocked in open(), which must fail the test, not
    # hang the worker as it exits
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        done = _run(tmp_path / "out", str(fifo), None)
    finally:
        writer.join(timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("trace", ["-", "/dev/stdin"])
def test_a_gzip_trace_whose_first_byte_comes_alone_is_unpacked(tmp_path: Path, trace: str) -> None:
    """gzip was told by the first two bytes `peek` brought, and one read of a pipe may bring one: a gzip trace
    piped in by a slow writer read as text, "not UTF-8 text: save it as CSV UTF-8"."""
    done = trickled([*SIMULATE, "--trace", trace, "--out", str(tmp_path / "out"), "--no-plot", "--policies",
                      "fixed", "--quiet"], _body(packed=True))
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["trace"]["requests"] == sum(
        1 + i % 5 for i in range(ROWS))
