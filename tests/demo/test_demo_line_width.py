"""The demo's lines fit an 80-column terminal, and say all they said.

84 of a run's 262 lines ran past 80 columns: the policy line 408 characters, each scale-down's why 334-368, the
average HPA's line with pods starting 256-264, and a pod's table row 92 where the table is 80 (`  (starting)`
after its last column). An 80-column terminal broke them mid-word ("the adapt / er's requests term"), and a row's
`(starting)` wrapped to the left edge under it, read as a row of its own. Now each line is wrapped at word
boundaries, to the terminal's width, or to 80 columns where piped (a log), with a hanging indent past the line's
own (`[  28s]` stands alone at the left); unwrapped (`demo_output.unwrap`) it is what it said before."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.demo.report_lines import POD_TABLE_HEADER, pod_table_row
from autoscaler.demo.run import Demo
from autoscaler.demo.say import fit, fit_command
from tests.demo.demo_output import unwrap
from tests.support.terminal import REPO

PIPED_WIDTH = 80

SAID = ("[28s]", "HPA:", "scale-down", "skew-aware", "least-needed", "demo-7", "(cost", "400,", "was", "300;",
        "lowest,", "newest", "2..8)", "req/s", "--start-timeout)", "scale_down_tau_s", "/tmp/modelmesh-demo-x/")
"""Words from the demo's lines, hyphens and all: a wrap at a hyphen ("scale-/down") would read back wrong."""
WORDS = st.lists(st.one_of(st.sampled_from(SAID),
                           st.text(st.characters(codec="ascii", categories=("L", "N", "P", "S")), min_size=1,
                                   max_size=30).filter(lambda word: "\\" not in word)), min_size=1, max_size=80)
"""A line's words: what the demo says has no backslash (which a reader takes for the shell's continuation)."""


@given(WORDS, st.sampled_from(["", "  ", "[  28s] ", "[1234s] "]), st.integers(40, 200))
def test_a_wrapped_line_fits_its_width_and_unwrapped_is_the_line(words: list[str], lead: str, columns: int) -> None:
    line = lead + " ".join(words)
    wrapped = fit(line, columns)
    assert unwrap(wrapped) == line, wrapped
    first, *continued = wrapped.split("\n")
    assert first.startswith(lead), wrapped
    assert all(re.match(r" {4,}\S", more) for more in continued), wrapped
    # a word wider than the width stays whole, on a line of its own
    assert all(len(text) <= columns or " " not in text.strip() for text in wrapped.split("\n")), wrapped


@given(st.integers(1, 65535), st.lists(st.text("abcdefgh-_.%0123456789", min_size=1, max_size=40), min_size=1,
                                       max_size=12), st.integers(40, 200))
def test_a_wrapped_command_runs_in_a_shell_as_the_command_it_was(port: int, path: list[str], columns: int) -> None:
    """Pasted into a shell, the lines give curl the whole URL (printf stands for curl)."""
    url = f"https://127.0.0.1:{port}/" + "/".join(path[:-1]) + f"?labelSelector={path[-1]}"
    wrapped = fit_command(f'try: curl -sk "{url}"', columns)
    assert unwrap(wrapped) == f'try: curl -sk "{url}"'
    pasted = wrapped.removeprefix("try: curl -sk ")
    assert subprocess.run(["bash", "-c", f"printf '%s\\n' {pasted}"], capture_output=True, text=True,
                          check=True).stdout == url + "\n"
    # a line runs past the width only where it has no `/`, `?` or `&` to break after before its end
    assert all(len(text) <= columns or not re.search(r"[/?&].", text.removesuffix("\\"))
               for text in wrapped.split("\n")), wrapped


def test_a_starting_pods_row_fits_the_tables_width_and_says_it_is_starting() -> None:
    row = pod_table_row("demo-15", 0.0, None, None, None, ready=False)
    assert len(row) <= len(POD_TABLE_HEADER) == PIPED_WIDTH, f"\n{POD_TABLE_HEADER}\n{row}"
    assert "(starting)" in row


@pytest.mark.slow
def test_a_piped_demo_fits_80_columns_and_unwrapped_says_what_it_said(tmp_path: Path) -> None:
    """The real command, its output in a file (a log): the lines that open it, its tables and its HPA's lines."""
    with open(tmp_path / "out", "w") as out:
        run = subprocess.run([sys.executable, "-m", "autoscaler.cli", "demo", "--duration", "15"], stdout=out,
                             stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=240)
    assert run.returncode == 0, run.stderr
    printed = (tmp_path / "out").read_text()
    too_long = [line for line in printed.splitlines() if len(line) > PIPED_WIDTH]
    assert too_long == [], "\n".join(too_long)
    lines = unwrap(printed).splitlines()
    policy = Demo(4, 15, 3.0, Path(tempfile.gettempdir())).describe_policy()
    assert lines[1] == policy, (lines[1], policy)
    assert "  replicas 4 (4 ready)" in lines
    assert any(line.startswith("[") and "] HPA: modelmesh_desired_replicas proposes" in line for line in lines), (
        printed)
    # the command to try, pasted into a shell from its lines, asks the adapter for the value the HPA reads
    port = re.search(r"adapter on https://127\.0\.0\.1:(\d+)", lines[0]).group(1)  # type: ignore[union-attr]
    url = (f"https://127.0.0.1:{port}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/"
           "modelmesh_desired_replicas?labelSelector=deployment%3Dmodelmesh-serving-demo")
    assert lines[2] == f'try: curl -sk "{url}"', lines[2]
    pasted = printed[printed.index("try: curl -sk ") + len("try: curl -sk "):printed.index("\nwaiting for")]
    assert subprocess.run(["bash", "-c", f"printf '%s\\n' {pasted}"], capture_output=True, text=True,
                          check=True).stdout == url + "\n"
