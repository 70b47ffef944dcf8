"""The demo's scenario: the HPA it runs (on `modelmesh_desired_replicas`, the shipped behavior with its periods
compressed), the adapter's policy as the demo hands it over (its scale-down time constant compressed), and the
phases of load a person watches it follow."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.names import ServedMetric
from autoscaler.simulation.hpa_spec import Behavior, MetricSpec, ScalingPolicy, ScalingRules

TARGET_RPS_PER_POD = 100.0
SCALE_DOWN_TAU_S = 5.0
DESIRED = MetricSpec(ServedMetric.DESIRED_REPLICAS.value, "External", "AverageValue", 1.0)
DEMO_BEHAVIOR = Behavior(
    scale_up=ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 2), ScalingPolicy("Pods", 4, 2))),
    scale_down=ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 2),)),
)
"""The shipped behavior (no scale-down window of its own; 100% or 4 pods per 15 s up), periods compressed."""


@dataclass(frozen=True)
class Phase:
    starts_at: float  # fraction of the demo's duration, counted from the adapter's first served value
    title: str
    background_per_pod: float  # req/s per initial pod, spread over every Ready pod
    hot: float  # req/s of one hot model: on the oldest pod, and its copies on the added pods (`hot_model`)
    # Waits for the pods still starting (the scale-up's, on a slow machine): the drop that came while they
    # started had them removed first, as the ReplicaSet removes a pod not Ready before any other, and the demo
    # never showed the replicas it went up to. And for the adapter to rank them: a Ready pod without a deletion
    # cost is read as 0, and was removed first all the same.
    waits_for_starting_pods: bool = False


PHASES = (
    Phase(0.0, "even load: 90 req/s per pod (target 100)", 90, 0),
    # The hot model's 300 req/s come with the rest falling to 30 per pod: 330, 30, 30, 30 average 105, within an
    # average HPA's tolerance of the target, while one pod runs at three times it (docs/design.md, Why not the
    # average). On top of 90 per pod the average rose too, and the two differed by a pod.
    Phase(0.2, "a hot model lands on the oldest pod: 300 req/s for it, the other models' 120 spread over every pod",
          30, 300),
    Phase(0.5, "traffic drops: the HPA brings pods down slowly, least-needed first", 10, 30,
          waits_for_starting_pods=True),
)

