"""The scaling policies the simulator compares (docs/design.md), each asked at every HPA sync.

- `fixed`: the replicas the peak needs, never changed: ModelMesh without an autoscaler.
- `fixed-max`: maxReplicas throughout the trace, not a policy to run but a bound: about the fewest delays any replica
  policy within the HPA's bounds gets on the trace (more pods delayed less in our replays, but for a few
  percent of noise from where copies sit). What is delayed even then waits for ModelMesh to copy a hot model
  or load a cold one, not for pods.
- `mean-hpa`: an HPA on the mean per-pod GPU busy (Resource-style utilization target, 80%), default behavior,
  default pod choice (no deletion costs, so the ReplicaSet removes the newest pod): the built-in ModelMesh HPA.
- `skew-aware`: our served `modelmesh_desired_replicas` (AverageValue 1) with the shipped HPA behavior and our
  deletion costs. The pods' signals go through `autoscaler.policies.decision.decide`, the code the adapter
  serves, with the simulated clock: nothing of it is re-implemented here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final, Protocol

from autoscaler.model import RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.simulation.cluster import Cluster
from autoscaler.simulation.hpa import HorizontalPodAutoscaler, ScaleDecision
from autoscaler.simulation.hpa_manifest import describe_behavior
from autoscaler.simulation.hpa_spec import DEFAULT_BEHAVIOR, Behavior, HpaPod, HpaSpec, MetricSpec
from autoscaler.simulation.run_size import BUSY

KEY: Final = RuntimeKey("simulated", "modelmesh-serving-simulated")
MEAN_TARGET_PERCENT: Final = 80.0
DESIRED_METRIC: Final = MetricSpec(ServedMetric.DESIRED_REPLICAS.value, "External", "AverageValue", 1.0)
GPU_METRIC: Final = MetricSpec("gpu", "Resource", "Utilization", MEAN_TARGET_PERCENT)


def run_decide(snapshot: RuntimeSnapshot, policy: RuntimePolicy, memory: RuntimeMemory | None,
               now: float, window_s: float) -> tuple[RuntimeView, RuntimeMemory]:
    """The one call into the adapter's decision code; a change of its signature is fixed here only."""
    return decide(snapshot, policy, memory, now, window_s)


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    desired: int
    reason: str
    term: str | None = None  # which term of the recommendation decided (skew-aware only)
    proposed: int | None = None  # what the HPA's metric proposed, before its behavior


class SimPolicy(Protocol):
    name: str
    terms: Counter[str]

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome: ...

    def describe(self) -> str: ...


@dataclass
class FixedPolicy:
    replicas: int
    name: str = "fixed"
    why: str = f"the peak's need at {BUSY:.0%} busy"
    terms: Counter[str] = field(default_factory=Counter)

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome:
        return SyncOutcome(self.replicas, "fixed replicas", proposed=self.replicas)

    def describe(self) -> str:
        return f"{self.name}: {self.replicas} replicas ({self.why})"


def max_bound(max_replicas: int) -> FixedPolicy:
    """`fixed-max`: every pod maxReplicas allows, throughout the trace: the delays no replica policy gets below."""
    return FixedPolicy(max_replicas, "fixed-max", "maxReplicas throughout the trace: a bound on what "
                       "any replica policy within the bounds can do, not a policy to run")


def _hpa_pods(cluster: Cluster) -> list[HpaPod]:
    return [HpaPod(p.name, p.ready) for p in cluster.pods]


@dataclass
class MeanHpaPolicy:
    min_replicas: int
    max_replicas: int
    name: str = "mean-hpa"
    terms: Counter[str] = field(default_factory=Counter)
    hpa: HorizontalPodAutoscaler = field(init=False)

    def __post_init__(self) -> None:
        self.hpa = HorizontalPodAutoscaler(HpaSpec((GPU_METRIC,), self.min_replicas, self.max_replicas))

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome:
        # A Ready pod not scraped yet has no metric: the HPA counts it as missing (at 100% of its request on a
        # scale-down, idle on a scale-up), not as an idle pod.
        values = {s.name: 100.0 * s.gpu_busy for s in cluster.samples(now, per_model=False)
                  if s.ready and s.gpu_busy is not None}
        decision = self.hpa.sync(now, cluster.replicas, _hpa_pods(cluster), {GPU_METRIC.name: values})
        return SyncOutcome(decision.desired, decision.reason, proposed=decision.proposals[GPU_METRIC.name])

    def describe(self) -> str:
        return (f"mean-hpa: HPA on mean GPU busy at {MEAN_TARGET_PERCENT:g}%, default behavior, newest pod removed "
                f"first; replicas {self.min_replicas}..{self.max_replicas}")


@dataclass
class SkewAwarePolicy:
    policy: RuntimePolicy
    min_replicas: int
    max_replicas: int
    behavior: Behavior | None = DEFAULT_BEHAVIOR  # None: an HPA without `behavior` (the older rules)
    window_s: float = 30.0
    deletion_costs: bool = True  # False: as the adapter's `--deletion-cost off`, the ReplicaSet removes the newest
    name: str = "skew-aware"
    terms: Counter[str] = field(default_factory=Counter)
    hpa: HorizontalPodAutoscaler = field(init=False)
    memory: RuntimeMemory | None = None
    last_view: RuntimeView | None = None

    def __post_init__(self) -> None:
        self.hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED_METRIC,), self.min_replicas, self.max_replicas,
                                                   self.behavior))

    def refresh(self, now: float, cluster: Cluster) -> RuntimeView:
        """One adapter refresh: decide, and write the deletion costs onto the pods (the leader's job)."""
        snapshot = RuntimeSnapshot(KEY, cluster.samples(now), taken_at=now, replicas=cluster.replicas)
        view, self.memory = run_decide(snapshot, self.policy, self.memory, now, self.window_s)
        costs = {name: cost for name, _, _, cost in view.pods.deletion_costs()} if self.deletion_costs else {}
        for pod in cluster.pods:
            cost = costs.get(pod.name)
            pod.deletion_cost = cost if cost is not None else 0
        if view.winner is not None:
            self.terms[view.winner] += 1
        self.last_view = view
        return view

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome:
        view = self.refresh(now, cluster)
        served = view.values[ServedMetric.DESIRED_REPLICAS].value
        decision: ScaleDecision = self.hpa.sync(now, cluster.replicas, _hpa_pods(cluster),
                                                {DESIRED_METRIC.name: served})
        return SyncOutcome(decision.desired, decision.reason, view.winner, decision.proposals[DESIRED_METRIC.name])

    def describe(self) -> str:
        p = self.policy
        return (f"skew-aware: modelmesh_desired_replicas (skew_order {p.skew_order:g}, target_gpu_busy "
                f"{p.target_gpu_busy:g}, scale_down_tau_s {p.scale_down_tau_s:g}), "
                f"{self._deletion() if self.deletion_costs else 'no deletion costs (newest pod removed first)'}, "
                f"replicas {self.bounds[0]}..{self.bounds[1]}; HPA behavior {describe_behavior(self.behavior)}")

    def _deletion(self) -> str:
        """The deletion costs with the need weights that ranked the pods: two runs that differ only in them
        (need_weight_unique 0 against 1) would otherwise read the same."""
        p = self.policy
        return (f"deletion costs (need weights requests {p.need_weight_requests:g}, gpu {p.need_weight_gpu:g}, "
                f"cache {p.need_weight_cache:g}, unique {p.need_weight_unique:g})")

    @property
    def bounds(self) -> tuple[int, int]:
        """The replicas it can run: the HPA's bounds narrowed by the policy file's, which the adapter keeps
        its recommendation within."""
        low = max(self.min_replicas, self.policy.min_replicas or 0)
        return min(low, self.max_replicas), min(self.max_replicas, self.policy.max_replicas or self.max_replicas)
