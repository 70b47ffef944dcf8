"""What a new user reads after `simulate --synthetic --models 50 --hours 1`: the printed table, report.md and
timeline.png say whether each policy meets the goal, which cold loads a ratio counts, one precision a column,
each policy's name once, and every policy's line in each panel."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.simulation.cluster import ClusterShape
from autoscaler.simulation.engine import simulate
from autoscaler.simulation.figures import hours_column
from autoscaler.simulation.goal import judge
from autoscaler.simulation.policies import FixedPolicy
from autoscaler.simulation.report import Counted
from autoscaler.simulation.report_text import goal_text, timeline_title
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.timeline_plot import COLORS, timeline_figure
from autoscaler.simulation.trace_buckets import buckets
from tests.simulation.runs import SIMULATE

LIMITS = {"pod_hours": 1.15, "delayed": 0.1, "avoidable_cold_loads": 0.25}  # the goal as the task states it
LABELS = {"pod_hours": "pod-hours", "delayed": "delayed requests", "avoidable_cold_loads": "avoidable cold loads"}


@dataclass(frozen=True)
class Run:
    stdout: str
    markdown: str
    report: dict[str, Any]
    plot: Path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The new user's run, once for the module (seconds)."""
    out = tmp_path_factory.mktemp("q")
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "50", "--hours", "1", "--out", str(out), "--quiet"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return Run(result.stdout, (out / "report.md").read_text(), json.loads((out / "report.json").read_text()),
               out / "timeline.png")


def table_rows(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The Markdown table in `text`: its header's cells, and each policy's row's cells by its name."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {cells[0]: cells for cells in
            ([cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:])}
    return header, rows


def judged(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: p for name, p in report["policies"].items() if "goal" in p}


def test_the_printed_output_and_report_md_say_part_by_part_whether_each_policy_meets_the_goal(run: Run) -> None:
    assert run.report["policies"]["mean-hpa"]["delayed_ratio"] >= 0.001  # not quiet: the delay part is 0.1x
    policies = judged(run.report)
    assert "skew-aware" in policies
    for name, policy in policies.items():
        goal = policy["goal"]
        # A ratio over a mean-hpa that had none is no ratio: met only by having none too
        own = {"delayed": policy["delayed_requests"], "avoidable_cold_loads": policy["avoidable_cold_loads"]}
        met = {key: own[key] == 0 if goal[key] is None else goal[key] <= limit for key, limit in LIMITS.items()}
        assert goal["met"] == all(met.values())
        had = {"delayed": "delayed none", "avoidable_cold_loads": "had no avoidable cold load"}
        parts = [f"{LABELS[key]} {goal[key]:g}x (at most {limit:g}x: {'met' if met[key] else 'missed'})"
                 if goal[key] is not None else
                 f"{LABELS[key]} n/a (mean-hpa {had[key]}, this policy {own[key]}: {'met' if met[key] else 'missed'})"
                 for key, limit in LIMITS.items()]
        line = f"- {name}: {'met' if goal['met'] else 'missed'}: " + "; ".join(parts)
        assert line in run.stdout.splitlines(), (line, run.stdout)
        assert line in run.markdown.splitlines(), (line, run.markdown)
        assert goal["parts"] == {key: {"limit": LIMITS[key], "met": met[key]} for key in LIMITS}  # and for scripts


@pytest.mark.parametrize(("delayed", "base_delayed", "said"), [
    # mean-hpa delays 0.05% of requests: the delay part asks only not to delay 5% more
    (520.0, 500.0, "delayed requests 1.04x (at most 1.05x, mean-hpa delaying under 0.1% of requests: met)"),
    (0.0, 0.0, "delayed requests n/a (mean-hpa delayed none, this policy 0: met)"),
    (353.0, 0.0, "delayed requests n/a (mean-hpa delayed none, this policy 353: missed)"),
])
def test_the_delay_part_says_what_it_asks_where_mean_hpa_barely_delays(delayed: float, base_delayed: float,
                                                                        said: str) -> None:
    base = Counted(200.0, round(base_delayed), 1_000_000, 100)
    shown = Counted(200.0, round(delayed), 1_000_000, 100)
    verdict = judge(shown, base, 100)
    goal = {"pod_hours": verdict.pod_hours, "delayed": verdict.delayed, "avoidable_cold_loads": verdict.cold,
            "met": verdict.met, "parts": {p.key: {"limit": p.limit, "met": p.met} for p in verdict.parts()}}
    report = {"policies": {"mean-hpa": {"delayed_requests": base.delayed_requests},
                           "skew-aware": {"delayed_requests": shown.delayed_requests, "avoidable_cold_loads": 0,
                                          "goal": goal}}}
    text = goal_text(report)
    assert text is not None and said in text, text


def test_the_tables_cold_load_ratio_is_of_the_avoidable_loads_the_goal_counts(run: Run) -> None:
    # All 6 cold loads of the run are first loads no policy avoids: the goal has no ratio (mean-hpa had no
    # avoidable one), and the table read 1x.
    assert run.report["unavoidable_cold_loads"] > 0
    for text in (run.stdout, run.markdown):
        header, rows = table_rows(text)
        versus = next(i for i, cell in enumerate(header) if cell.startswith("vs mean-hpa"))
        assert header[versus].endswith("/ avoidable cold loads"), header[versus]
        cold = header.index("cold loads (avoidable)")
        for name, policy in run.report["policies"].items():
            assert rows[name][cold] == f"{policy['cold_loads']} ({policy['avoidable_cold_loads']})"
        for name, policy in judged(run.report).items():
            ratio = policy["goal"]["avoidable_cold_loads"]
            assert rows[name][versus].split(" / ")[2] == ("n/a" if ratio is None else f"{ratio:g}x"), rows[name]


def test_report_md_names_each_policy_once_before_its_description(run: Run) -> None:
    for name in run.report["policies"]:
        line = next(line for line in run.markdown.splitlines() if line.startswith(f"- **{name}**: "))
        assert not line.removeprefix(f"- **{name}**: ").startswith(f"{name}:"), line


def test_the_pod_hours_column_has_one_precision(run: Run) -> None:
    for text in (run.stdout, run.markdown):
        header, rows = table_rows(text)
        column = header.index("pod-hours")
        cells = {name: rows[name][column] for name in run.report["policies"]}
        assert len({len(cell.partition(".")[2]) for cell in cells.values()}) == 1, cells  # "6" beside "5.58"
        for name, cell in cells.items():
            decimals = len(cell.partition(".")[2])
            assert float(cell) == pytest.approx(run.report["policies"][name]["pod_hours"], abs=0.51 * 10 ** -decimals)


@given(st.lists(st.floats(0.0, 1e5, allow_nan=False) | st.sampled_from([0.0, 6.0, 10.0, 5.58]), min_size=1,
                max_size=6))
def test_a_pod_hours_column_is_one_precision_and_keeps_three_digits_of_its_smallest(values: list[float]) -> None:
    cells = hours_column(values)
    decimals = {len(cell.partition(".")[2]) for cell in cells}
    assert len(decimals) == 1
    shown = decimals.pop()
    for value, cell in zip(values, cells, strict=True):
        assert abs(float(cell) - value) <= 0.5 * 10 ** -shown * (1 + 1e-9) + abs(value) * 1e-12
    smallest = min((v for v in values if v), default=0.0)
    if 0 < smallest < 100 and shown < 6:  # 3 significant digits of the smallest: 0.0333 not 0.03
        assert abs(float(f"{smallest:.{shown}f}") - smallest) <= 0.005 * smallest + 1e-12


def pixels_near(image: np.ndarray, color: str, tolerance: float = 0.08) -> int:
    rgb = np.array(matplotlib.colors.to_rgb(color))
    return int((np.abs(image[..., :3] - rgb).max(axis=-1) < tolerance).sum())


def test_every_policys_line_shows_in_the_cold_loads_panel_where_all_four_are_equal(run: Run) -> None:
    # Each policy cold-loads the same 6 models at the same times: drawn alike, only the last drawn showed.
    assert len({p["cold_loads"] for p in run.report["policies"].values()}) == 1
    image = matplotlib.image.imread(run.plot)
    height, width = image.shape[:2]
    panel = image[int(0.72 * height):int(0.95 * height), int(0.08 * width):int(0.85 * width)]  # no legend
    for name in run.report["policies"]:
        assert pixels_near(panel, COLORS[name]) > 300, name


def test_the_count_panels_tick_whole_numbers_and_say_per_what_interval() -> None:
    shape = ClusterShape(pod_rps=20.0, cache_models=4, load_time_s=10.0, startup_delay_s=30.0)
    trace = synthetic(models=12, hours=0.5, mean_rps=30.0, shape="churn", seed=3)
    length, parts = buckets(trace, 5.0)
    results = [simulate(parts, length, 5.0, shape, FixedPolicy(replicas, name), replicas)
               for name, replicas in (("fixed", 3), ("fixed-max", 3))]
    figure = timeline_figure(trace.interval_s, trace.rate_per_interval().tolist(), results)
    figure.canvas.draw()
    load, replicas, delayed, cold = figure.axes[:4]
    assert "req" in load.get_ylabel() and "/s" in load.get_ylabel()
    assert re.fullmatch(r"delayed requests\s+per 60 s interval", delayed.get_ylabel()), delayed.get_ylabel()
    assert re.fullmatch(r"cold loads\s+per 60 s interval", cold.get_ylabel()), cold.get_ylabel()
    assert "hours" in cold.get_xlabel()
    for axis in (replicas, delayed, cold):
        labels = [tick.get_text().replace("\N{MINUS SIGN}", "-") for tick in axis.get_yticklabels()]
        assert labels and all(re.fullmatch(r"-?\d+", text) for text in labels), labels
    [legend] = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["fixed", "fixed-max"]


def test_the_timeline_names_its_trace_and_cluster_and_its_policies_once(run: Run) -> None:
    # A reviewer: timeline.png had no title or trace name, and the same legend beside three panels. The figure
    # `simulate` draws is titled with the trace and the cluster as report.md's first line gives them, and one
    # legend names each policy once.
    shape = ClusterShape(pod_rps=20.0, cache_models=4, load_time_s=10.0, startup_delay_s=30.0)
    trace = synthetic(models=12, hours=0.5, mean_rps=30.0, shape="churn", seed=3)
    length, parts = buckets(trace, 5.0)
    results = [simulate(parts, length, 5.0, shape, FixedPolicy(3, name), 3) for name in ("fixed", "mean-hpa")]
    figure = timeline_figure(trace.interval_s, trace.rate_per_interval().tolist(), results,
                             title=timeline_title(run.report))
    title = figure.get_suptitle()
    trace_said, cluster = run.report["trace"], run.report["cluster"]
    assert title.startswith(f"{trace_said['source']}: {trace_said['models']} models, ")
    assert f"{cluster['pod_rps']:g} req/s per pod" in title and f"{cluster['cache_models']} model copies" in title
    assert f"replicas {cluster['min_replicas']}..{cluster['max_replicas']}" in title
    assert not any(axis.get_legend() for axis in figure.axes)
    [legend] = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["fixed", "mean-hpa"]


def test_the_verdict_says_when_mean_hpa_failed_the_requests_its_ratios_measure_against() -> None:
    """A diurnal day: mean-hpa's full caches refused 60% of the requests (a failed request loads nothing and
    busies no pod), and skew-aware, serving them, read "missed: pod-hours 3.716x" with nothing saying why."""
    goal = {"pod_hours": 3.716, "delayed": None, "avoidable_cold_loads": None, "met": False,
            "parts": {"pod_hours": {"limit": 1.15, "met": False}, "delayed": {"limit": 0.1, "met": True},
                      "avoidable_cold_loads": {"limit": 0.25, "met": True}}}
    base: dict[str, Any] = {"requests": 1_000, "refused_requests": 600, "delayed_requests": 0,
                            "avoidable_cold_loads": 0}
    report = {"policies": {
        "mean-hpa": base,
        "skew-aware": {"requests": 1_000, "refused_requests": 0, "delayed_requests": 0, "avoidable_cold_loads": 0,
                       "goal": goal}}}
    text = goal_text(report)
    assert text is not None
    assert "- mean-hpa failed 60% of the requests" in text, text
    assert "no baseline for a policy that serves them" in text
    base["refused_requests"] = 5  # 0.5%: the ratios stand
    assert "failed" not in (goal_text(report) or "")


def test_the_goals_header_says_the_delay_part_asks_less_where_mean_hpa_barely_delays() -> None:
    report = {"policies": {"mean-hpa": {"requests": 10, "delayed_requests": 0},
                           "skew-aware": {"requests": 10, "delayed_requests": 0, "avoidable_cold_loads": 0,
                                          "goal": {"pod_hours": 1.0, "delayed": None, "avoidable_cold_loads": None,
                                                   "met": True, "parts": {}}}}}
    header = (goal_text(report) or "").splitlines()[0]
    assert header == ("Goal against mean-hpa (at most 1.15x its pod-hours, 0.1x its delayed requests (1.05x where "
                      "it delays under 0.1% of requests) and 0.25x its avoidable cold loads):")
