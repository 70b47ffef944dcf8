"""The demo's one line on what an HPA on the average misses: a saturated pod behind an average that looks fine.

Why: the README sets the adapter against an HPA on the pods' average request rate, and the demo printed both, but
its numbers never showed the difference (8 pods against 7): the hot model came on top of an already busy runtime,
so the average rose as well. Where the hot pod runs far past the target while the average keeps the replicas, this
says so, in one line, beside the table that shows it.

On the load the demo set (the table's `true req/s`), not the exporters' rates: those trail the load by their 6 s
window, and the line once said "demo-0 serves 204 req/s" under a table reading demo-0 75. And only below
maxReplicas: at the maximum an HPA on the average could add no pod whatever it read, so it misses nothing there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.simulation.hpa_metrics import count_per_pod
from autoscaler.simulation.hpa_spec import HpaPod, MetricSpec, Tolerances

SATURATED: float = 1.5
"""A pod past this many times the target is saturated: its queue grows whatever the average says."""


def blind_spot_line(metric: MetricSpec, pods: Sequence[HpaPod], true_rates: Mapping[str, float],
                    tolerances: Tolerances, max_replicas: int) -> str | None:
    """`the average looks fine (105 req/s a pod: an HPA on it keeps 4 pods), but demo-0 serves 330 req/s, ...`
    where the busiest Ready pod's true rate (`true_rates`: the load the demo set on each Ready pod) is past
    `SATURATED` times the target, while an HPA on the average of those rates (`count_per_pod`, as the Kubernetes
    HPA counts) keeps the current replicas and could add one (below `max_replicas`); None otherwise."""
    if len(pods) >= max_replicas:
        return None
    count = count_per_pod(metric, true_rates, len(pods), pods, tolerances)
    measured = {p.name: true_rates[p.name] for p in pods if p.ready and p.name in true_rates}
    if count is None or not measured or count.proposal != len(pods):
        return None
    hottest = max(measured, key=lambda name: (measured[name], name))
    times = measured[hottest] / metric.target
    if times < SATURATED:
        return None
    return (f"  the average looks fine ({count.ratio * metric.target:.0f} req/s a pod: an HPA on it keeps "
            f"{len(pods)} pods), but {hottest} serves {measured[hottest]:.0f} req/s, {times:.1f} times the target: "
            f"the adapter's skew-aware request load counts it")
