"""A pod just under its capacity makes no copies of its quiet models, as in ModelMesh.

A reviewer's dense trace (500 models, every one called every minute): mean-hpa's rate checks made 505 copies, 361 of
them from pods routed 19.9 to 20 req/s of their 20, down to models called once a minute; one check made 102, 100 of
them onto one new pod. The simulated rate check took a copy's bandwidth on a pod under capacity as what the pod had
left for it, `pod_rps` less the other copies' rates: about the copy's own rate on a pod at 19.99, so every copy
asked. In ModelMesh a copy's threshold is 0.9 x its max concurrency over the mean time a request spends in the model
server (`getRpmScaleThreshold`, ModelMesh.java l.2795), and each copy lets at most its max concurrency in
(`limiter`, l.2689-2712): by Little's law no request takes longer than the pod's copies in use x max concurrency
over what it serves, so no threshold is under 0.9 x that rate / those copies (rate_check.copy_threshold).
"""

from __future__ import annotations

from pathlib import Path

from tests.simulation.runs import report, simulate, write_trace

QUIET = 40


def edge_trace(tmp_path: Path) -> Path:
    """A hot model at 1,199 requests a minute (19.98 req/s) beside `QUIET` models at 6 a minute; from minute 10 the
    quiet ones at 30 (0.5 req/s each, 20 req/s in all): two pods holding the hot model and half the quiet ones each
    are routed 19.99 req/s of their 20."""
    rows = "".join(f"{60 * minute},q{m},{6 if minute < 10 else 30}\n" for minute in range(40) for m in range(QUIET))
    rows += "".join(f"{60 * minute},hot,1199\n" for minute in range(40))
    return write_trace(tmp_path, rows)


def test_pods_just_under_capacity_copy_none_of_their_quiet_models(tmp_path: Path) -> None:
    result = simulate(tmp_path, edge_trace(tmp_path), "--policies", "mean-hpa", "--min-replicas", "2",
                      "--max-replicas", "2")
    assert result.returncode == 0, result.stderr
    policy = report(tmp_path)["policies"]["mean-hpa"]
    # Was 40: at the first check after the rise each of the 40 quiet copies (0.5 req/s, 21 copies a pod: no
    # threshold under 0.9 x 19.99 / 21 = 0.86) asked for a copy on the other pod
    assert policy["copy_loads"] == 0, policy
    assert (policy["cold_loads"], policy["delayed_ratio"]) == (0, 0.0), policy
