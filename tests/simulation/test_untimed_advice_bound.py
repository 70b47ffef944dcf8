"""Untimed advice, read line by line: the delay advice names ModelMesh's fix first, with a command that replays the
trace timed, and then what a replica policy can do. That last line quoted this untimed run's bound ("delays
0.795x mean-hpa's") right under the timed command, where the timed run's was 0.147x, which the command did not
show. It now says its figure is this untimed run's, and the timed command runs fixed-max too, so that the
report it writes carries the timed bound."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.simulation.runs import report, simulate, write_trace


def test_the_line_after_the_timed_command_says_its_bound_is_the_untimed_runs(tmp_path: Path) -> None:
    rows = "".join(f"{60 * minute},{model},{60 * rps}\n" for minute in range(20)
                   for model, rps in (("a", 25), ("b", 40)))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--pod-rps", "20", "--queue-untimed")
    assert result.returncode == 0, result.stderr
    untimed = report(tmp_path)
    [entry] = [e for e in untimed["advice"] if e["part"] == "delayed"]
    printed = result.stdout.split("What to change", 1)[1].split("\n\n", 1)[0].splitlines()
    at = printed.index(f"  compare: {entry['first']['command']}")
    then = printed[at + 1]
    assert then.startswith("  then, delayed requests: "), then
    figure = f"delays {untimed['bound']['delayed_vs_mean-hpa']:g}x mean-hpa's"
    assert figure in then and then.index("untimed") < then.index(figure), then
    # The command shown writes a report with the timed bound, the figure a user compares
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    followed = subprocess.run(["bash", "-c", entry["first"]["command"]], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env=env)
    assert followed.returncode == 0, followed.stderr
    words = shlex.split(entry["first"]["command"])
    timed = json.loads((Path(words[words.index("--out") + 1]) / "report.json").read_text())
    assert timed["cluster"]["queue_timed"] and "bound" in timed, sorted(timed)
    assert "Bound: with every pod maxReplicas allows" in followed.stdout
