"""Untimed, a copy taking more than its pod serves but under ModelMesh's scaleUpRpmThreshold is never copied, and
the report said nothing of it.

A hand trace (model a at 25 req/s, b at 40, `--pod-rps 20 --queue-untimed`) delayed every one of a's requests under
every policy, fixed-max too, with `warnings: []`; report.md never said "untimed" nor "2000 rpm", and its Bound line
said the delays "wait for ModelMesh to copy hot models (its rate check)", a copy that never comes untimed. b's
second copy takes 20 req/s, what its pod serves: it is not stuck.
"""

from __future__ import annotations

from pathlib import Path

from tests.simulation.runs import report, simulate, write_trace

HOUR = 20


def hand_trace(tmp_path: Path, **rates: int) -> Path:
    return write_trace(tmp_path, "".join(f"{60 * minute},{model},{60 * rps}\n"
                                         for minute in range(HOUR) for model, rps in rates.items()))


def test_untimed_copies_stuck_under_the_threshold_are_named_in_the_report(tmp_path: Path) -> None:
    result = simulate(tmp_path, hand_trace(tmp_path, a=25, b=40), "--pod-rps", "20", "--queue-untimed")
    assert result.returncode == 0, result.stderr
    written = report(tmp_path)
    assert written["policies"]["fixed-max"]["delayed_ratio"] > 0.3  # a's requests, all of them
    [note] = [w for w in written["warnings"] if "--queue-untimed" in w]
    assert "a (30,000 requests at 25 req/s a copy)" in note, note
    assert "b (" not in note  # its two copies take 20 req/s each: what a pod serves
    for said in ("2000 rpm", "perModelConcurrencyLimit", "MM_SCALEUP_RPM_THRESHOLD", "--scaleup-rpm",
                 'docs/operations.md, "The queue delay is always 0"'):
        assert said in note, said
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert note in markdown and note in result.stderr
    for text in (markdown, result.stdout):
        assert "wait for ModelMesh to copy hot models (its rate check)" not in text
        assert "untimed, ModelMesh never copies" in text


def test_no_note_where_the_queue_is_timed_or_no_copy_sits_between_the_pod_and_the_threshold(tmp_path: Path) -> None:
    for flags, rates in ((("--pod-rps", "20"), {"a": 25, "b": 40}),
                         (("--pod-rps", "20", "--queue-untimed"), {"a": 15, "b": 40}),
                         (("--pod-rps", "20", "--queue-untimed", "--scaleup-rpm", "1080"), {"a": 25, "b": 40})):
        result = simulate(tmp_path, hand_trace(tmp_path, **rates), *flags)
        assert result.returncode == 0, result.stderr
        assert [w for w in report(tmp_path)["warnings"] if "--queue-untimed" in w] == [], flags
