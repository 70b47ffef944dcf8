"""The demo's one line on what an HPA on the average misses: a saturated pod behind an average that looks fine.

Why: the README sets the adapter against an HPA on the pods' average request rate, and the demo printed both, but
its numbers never showed the difference (8 pods against 7): the hot model came on top of an already busy runtime,
so the average rose as well. Where the hot pod runs far past the target while the average adds no pod, this says
so, in one line, beside the table that shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.simulation.hpa import HpaPod, MetricSpec, Tolerances, count_per_pod

SATURATED: float = 1.5
"""A pod past this many times the target is saturated: its queue grows whatever the average says."""


def blind_spot_line(metric: MetricSpec, pods: Sequence[HpaPod], rates: Mapping[str, float],
                    tolerances: Tolerances) -> str | None:
    """`the average looks fine, but demo-0 serves 331 req/s, 3.3 times the target ...` where the busiest Ready
    pod's rate (`rates`, the exporters') is past `SATURATED` times the target and an HPA on the average
    (`count_per_pod`, as the Kubernetes HPA counts) adds no pod; None otherwise."""
    count = count_per_pod(metric, rates, len(pods), pods, tolerances)
    measured = {p.name: rates[p.name] for p in pods if p.ready and p.name in rates}
    if count is None or not measured or count.proposal > len(pods):
        return None
    hottest = max(measured, key=lambda name: (measured[name], name))
    times = measured[hottest] / metric.target
    if times < SATURATED:
        return None
    return (f"  the average looks fine (an HPA on it adds no pod), but {hottest} serves {measured[hottest]:.0f} "
            f"req/s, {times:.1f} times the target: the adapter's skew-aware request load counts it")
