"""Without per-model concurrency limits ModelMesh's rate check asks for copies at a flat 2000 rpm.

ModelMesh measures a copy's bandwidth only in latency-based mode, `latencyBased = limitModelConcurrency`; without
it every copy's scale-up threshold is `scaleUpRpmThreshold`, 2000 rpm, and its heavy mark 3/4 of that
(ModelMesh.java l.5677-5681), the janitor keeps a copy over 2/3 of the same (l.6295-6298) and the pods too busy to
take a copy are those over 4 x it (`getExcludeSet`, l.5836). That is the mode of a runtime not annotated
`perModelConcurrencyLimit`, whose queue ModelMesh does not time either: `simulate --queue-untimed`. The simulator
keeps the latency-based threshold there, and copies a model at 30 req/s onto the other pods at its first check.

Not followed yet, so marked a strict xfail: the flat threshold alone (tried 6 December) had `bench/simulate_shapes.py
--seeds 0 --queue-untimed` delay 73% of mixed's requests under mean-hpa and 69% under skew-aware (0.947x, was 0.613x),
56% of steady's under mean-hpa: nothing but the rate check then moves a hot model's requests off its one pod, where
ModelMesh has a second way out, the copy's wait limit ("Model queue overload", l.2681-2699, l.3656, l.3760), which
the simulator does not model. The two go in together (docs/simulation.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.simulation.runs import report, simulate, write_trace


def hot_trace(tmp_path: Path) -> Path:
    """One model at 1 req/s for 10 minutes, then 30 req/s (over the 18 req/s a copy alone on a 20 req/s pod asks
    for more at, latency-based, under 2000 rpm) for 20, beside 3 models at 1 req/s."""
    rows = "".join(f"{60 * minute},hot,{60 if minute < 10 else 1800}\n" for minute in range(30))
    rows += "".join(f"{60 * minute},m{m},60\n" for minute in range(30) for m in range(3))
    return write_trace(tmp_path, rows)


@pytest.mark.xfail(strict=True, reason="untimed ModelMesh's flat 2000 rpm threshold is not modelled yet: it needs the "
                   "copy's wait limit beside it (docstring)")
def test_untimed_a_model_under_2000_rpm_gets_no_copy_for_its_rate(tmp_path: Path) -> None:
    loads = {}
    for name, flags in (("timed", []), ("untimed", ["--queue-untimed"])):
        result = simulate(tmp_path, hot_trace(tmp_path), "--policies", "fixed", *flags)
        assert result.returncode == 0, result.stderr
        loads[name] = report(tmp_path)["policies"]["fixed"]["copy_loads"]
    # Timed, the hot model's copy asks for 30 // 18 = 1 more; untimed it was the same (1), where ModelMesh's
    # threshold is 2000 rpm, 33.3 req/s: none
    assert loads["timed"] >= 1
    assert loads["untimed"] == 0, loads
