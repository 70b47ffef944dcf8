"""The demo's "the average looks fine" line: said on the load the demo set, only where it is true.

It quoted the exporters' rates, 6 s behind the load: the table above it read `demo-0  75  203.7` while the line said
"demo-0 serves 204 req/s, 2.0 times the target"; and it came at maxReplicas, where an HPA on the average could add
no pod whatever it read, so there was nothing for it to miss.
"""

from __future__ import annotations

from autoscaler.demo.average_blind_spot import blind_spot_line
from autoscaler.demo.report_lines import RATE_PER_POD
from autoscaler.simulation.hpa_spec import HpaPod, Tolerances

PODS = [HpaPod(f"demo-{i}", True) for i in range(4)]
HOT = {"demo-0": 330.0, "demo-1": 30.0, "demo-2": 30.0, "demo-3": 30.0}


def test_a_saturated_pod_behind_an_average_that_keeps_the_replicas_is_said_with_its_true_load() -> None:
    line = blind_spot_line(RATE_PER_POD, PODS, HOT, Tolerances(), max_replicas=8)
    assert line == ("  the average looks fine (105 req/s a pod: an HPA on it keeps 4 pods), but demo-0 serves 330 "
                    "req/s, 3.3 times the target: the adapter's skew-aware request load counts it"), line


def test_nothing_at_max_replicas_where_no_pod_can_be_added() -> None:
    assert blind_spot_line(RATE_PER_POD, PODS, HOT, Tolerances(), max_replicas=4) is None


def test_nothing_where_the_average_would_scale_too() -> None:
    """8 pods, the copies relieving the hot pod: the average (53) asks for fewer pods, it does not keep them."""
    pods = [HpaPod(f"demo-{i}", True) for i in range(6)]
    busy = {"demo-0": 204.0, **{f"demo-{i}": 20.0 for i in range(1, 6)}}
    assert blind_spot_line(RATE_PER_POD, pods, busy, Tolerances(), max_replicas=8) is None


def test_nothing_where_no_pod_is_saturated() -> None:
    even = dict.fromkeys(HOT, 105.0)
    assert blind_spot_line(RATE_PER_POD, PODS, even, Tolerances(), max_replicas=8) is None
