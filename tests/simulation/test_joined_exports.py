"""Per-day exports joined under one header, as docs/simulation.md tells a user to for a range longer than
Prometheus answers at once. query_range includes its `end`: two ranges that meet (END=02:00, then START=02:00)
both write the boundary's point, so the joined file lists that minute twice. It was refused with "sum them first",
which, followed, doubled that minute's requests. The refusal now names the overlap and says to keep one row of
each; the guide says to end each range one step earlier."""

from __future__ import annotations

from pathlib import Path

from tests.simulation.runs import FAILED, HEADER, report, simulate

START = 1764547200  # 2025-12-01T00:00:00Z
STEP = 60
MODELS = {"bert": 120, "gpt2": 30, "t5": 7}


def export(start: int, end: int) -> list[str]:
    """The rows the guide's export writes for START..END (query_range's points at start, start + step, ..., end,
    each moved back a step), a model's count changing minute by minute as a real one does."""
    return [f"{t - STEP},{model},{rpm + (t // STEP) % 5}" for model, rpm in MODELS.items()
            for t in range(start, end + 1, STEP)]


def test_two_exports_that_meet_at_a_minute_are_refused_with_how_to_keep_one_row_of_it(tmp_path: Path) -> None:
    first, second = export(START, START + 7200), export(START + 7200, START + 14400)
    joined = tmp_path / "joined.csv"
    joined.write_text(HEADER + "\n".join(first + second) + "\n")
    result = simulate(tmp_path, joined, "--policies", "fixed")
    assert result.returncode == 2, result.stderr
    said = result.stderr.strip()
    assert said.startswith(f"{FAILED}{joined}: line "), said
    assert "3 rows in all repeat a model and interval" in said, said
    assert "sum them" not in said, said  # summed, the boundary minute counts twice
    assert "drop_duplicates()" in said and "one step before" in said, said
    # Done as it says (one row of each kept), the trace replays every request once
    kept = list(dict.fromkeys(first + second))
    joined.write_text(HEADER + "\n".join(kept) + "\n")
    result = simulate(tmp_path, joined, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["policies"]["fixed"]["requests"] == sum(int(row.split(",")[2]) for row in kept)


def test_rows_repeated_with_other_counts_are_still_told_to_sum(tmp_path: Path) -> None:
    """An export per pod repeats a model and minute with each pod's count: those are summed."""
    trace = tmp_path / "pods.csv"
    trace.write_text(HEADER + "0,a,1\n0,a,3\n60,a,2\n60,a,2\n120,a,5\n")
    result = simulate(tmp_path, trace, "--policies", "fixed")
    assert result.returncode == 2, result.stderr
    assert "sum them first" in result.stderr and "drop_duplicates" not in result.stderr, result.stderr
