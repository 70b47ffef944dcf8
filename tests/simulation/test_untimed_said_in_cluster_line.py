"""report.md's "Cluster:" line and timeline.png's title said nothing of --queue-untimed nor --scaleup-rpm (s58
review): a timed run, an untimed one and one untimed at 1080 rpm read the same, though untimed a copy is made only at
the flat threshold and the same trace delays far more. They now say it, and only untimed."""

from __future__ import annotations

from pathlib import Path

from autoscaler.simulation.report_text import timeline_title
from tests.simulation.runs import report, simulate, write_trace


def test_the_cluster_line_and_the_timeline_title_say_untimed_and_the_threshold(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, "".join(f"{60 * minute},{model},{60 * rps}\n"
                                          for minute in range(5) for model, rps in (("a", 12), ("b", 10))))
    said: dict[str, tuple[str, str]] = {}
    for name, flags in (("timed", ()), ("untimed", ("--queue-untimed",)),
                        ("untimed-1080", ("--queue-untimed", "--scaleup-rpm", "1080"))):
        (run := tmp_path / name).mkdir()
        result = simulate(run, trace, "--pod-rps", "20", "--policies", "fixed", *flags)
        assert result.returncode == 0, result.stderr
        [line] = [line for line in (run / "out" / "report.md").read_text().splitlines() if "Cluster:" in line]
        said[name] = (line, timeline_title(report(run)))
    for line, title in said.values():
        cluster = line.split("Cluster: ", 1)[1].rstrip(".")
        assert title.endswith("\n" + cluster), (title, line)  # the PNG's title says what report.md says
    assert "untimed" not in said["timed"][0] and "rpm" not in said["timed"][0]
    assert said["untimed"][0].endswith(
        ", queue untimed (no perModelConcurrencyLimit): another copy only at 2000 rpm a copy.")
    assert said["untimed-1080"][0].endswith(
        ", queue untimed (no perModelConcurrencyLimit): another copy only at 1080 rpm a copy (--scaleup-rpm).")
