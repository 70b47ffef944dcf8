"""The HPA model against the Kubernetes documentation's own examples (Horizontal Pod Autoscaling, "Algorithm
details", "Configurable scaling behavior", and the HorizontalPodAutoscaler walkthrough). Every expected number
below is the documentation's, or worked by hand from its rules in the comment beside it."""

from __future__ import annotations

import itertools

import pytest

from autoscaler.simulation.hpa import HorizontalPodAutoscaler
from autoscaler.simulation.hpa_manifest import behavior_from_manifest
from autoscaler.simulation.hpa_spec import (
    DEFAULT_BEHAVIOR,
    Behavior,
    HpaPod,
    HpaSpec,
    MetricSpec,
    ScalingPolicy,
    ScalingRules,
)

PER_POD = MetricSpec("requests", "Pods", "AverageValue", 100.0)  # 100m per pod, as in the docs
CPU = MetricSpec("cpu", "Resource", "Utilization", 50.0)
DESIRED = MetricSpec("modelmesh_desired_replicas", "External", "AverageValue", 1.0)
BUSY = MetricSpec("modelmesh_gpu_busy", "External", "Value", 0.8)


def behavior_of(document: dict[str, object]) -> Behavior:
    """A manifest's behavior, one that has it."""
    behavior = behavior_from_manifest(document)
    assert behavior is not None
    return behavior


def pods(n: int, unready: int = 0) -> list[HpaPod]:
    return [HpaPod(f"p{i}", ready=i >= unready) for i in range(n)]


def even(n: int, value: float) -> dict[str, float]:
    return {f"p{i}": value for i in range(n)}


@pytest.mark.parametrize(("per_pod", "expected"), [
    (200.0, 8),  # "200m against 100m: the number of replicas will be doubled"
    (50.0, 2),  # "50m: you'll halve the number of replicas"
    (108.0, 4),  # ratio 1.08, within the 0.1 tolerance: no change
    (92.0, 4),  # ratio 0.92, within tolerance
    (115.0, 5),  # ratio 1.15: ceil(4 * 1.15) = ceil(4.6) = 5
])
def test_replica_formula_and_tolerance(per_pod: float, expected: int) -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec((PER_POD,), min_replicas=1, max_replicas=20))
    assert hpa.sync(0.0, 4, pods(4), {"requests": even(4, per_pod)}).desired == expected


def test_walkthrough_305_percent_cpu_on_one_pod_ends_at_seven_replicas() -> None:
    # php-apache: CPU at 305% of a 50% target on one pod -> ceil(305/50) = 7 replicas. The default scale-up
    # policy (max of +4 pods and +100% per 15 s) first allows 1 + 4 = 5, then 7 a period later.
    hpa = HorizontalPodAutoscaler(HpaSpec((CPU,), min_replicas=1, max_replicas=10))
    first = hpa.sync(0.0, 1, pods(1), {"cpu": even(1, 305.0)})
    assert (first.proposals["cpu"], first.desired, first.limited_by) == (7, 5, "scaleUp policy")
    # The same load over 5 pods is 61% each: ceil(5 * 61 / 50) = ceil(6.1) = 7. Within the first period the
    # 4 pods added at t=0 still count, so nothing more yet; a period later, 7.
    assert hpa.sync(10.0, 5, pods(5), {"cpu": even(5, 61.0)}).desired == 5
    assert hpa.sync(15.0, 5, pods(5), {"cpu": even(5, 61.0)}).desired == 7


def test_scale_down_policies_example_80_to_10() -> None:
    # "scaleDown: policies: Pods 4 per 60s, Percent 10 per 60s": from 80 replicas to 10, the first step removes
    # 8; at 72, 10% is 7.2, rounded up to 8; below 40 the Pods policy (4 at a time) is the larger change.
    behavior = Behavior(DEFAULT_BEHAVIOR.scale_up,
                        ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60))))
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=1, max_replicas=100, behavior=behavior))
    replicas, seen = 80, [80]
    for minute in range(12):
        replicas = hpa.sync(60.0 * minute, replicas, pods(replicas), {DESIRED.name: 10.0}).desired
        seen.append(replicas)
    assert seen[:9] == [80, 72, 64, 57, 51, 45, 40, 36, 32]
    assert seen[9:] == [28, 24, 20, 16]  # 4 at a time below 40


def test_a_second_sync_within_the_period_counts_the_pods_already_removed() -> None:
    behavior = Behavior(DEFAULT_BEHAVIOR.scale_up, ScalingRules(0, "Max", (ScalingPolicy("Percent", 10, 60),)))
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=1, max_replicas=100, behavior=behavior))
    assert hpa.sync(0.0, 80, pods(80), {DESIRED.name: 10.0}).desired == 72
    assert hpa.sync(15.0, 72, pods(72), {DESIRED.name: 10.0}).desired == 72  # 10% of the 80 at period start
    assert hpa.sync(60.0, 72, pods(72), {DESIRED.name: 10.0}).desired == 64


def test_a_scale_that_was_not_written_does_not_count_against_the_period() -> None:
    # The controller records a scale event only after its update of the scale subresource worked: a failed
    # write (409 conflict) leaves the next sync free to try the same step again.
    behavior = Behavior(DEFAULT_BEHAVIOR.scale_up, ScalingRules(0, "Max", (ScalingPolicy("Pods", 1, 60),)))
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=1, max_replicas=10, behavior=behavior))
    assert hpa.recommend(0.0, 5, pods(5), {DESIRED.name: 2.0}).desired == 4  # the write fails: not recorded
    written = hpa.recommend(15.0, 5, pods(5), {DESIRED.name: 2.0})
    assert written.desired == 4
    hpa.record_scale(15.0, written)
    assert hpa.recommend(30.0, 4, pods(4), {DESIRED.name: 2.0}).desired == 4  # one pod per 60 s: wait
    assert hpa.recommend(76.0, 4, pods(4), {DESIRED.name: 2.0}).desired == 3


def test_scale_down_stabilization_window_uses_the_highest_recommendation_of_the_window() -> None:
    # The default: 300 s scale-down window, 100% per 15 s.
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=1, max_replicas=20))
    replicas = 10
    history = []
    for t in range(0, 400, 15):
        value = 10.0 if t < 60 else 4.0
        decision = hpa.sync(float(t), replicas, pods(replicas), {DESIRED.name: value})
        replicas = decision.desired
        history.append((t, replicas))
    # 10 was last recommended at t=45; it leaves the window (t > now - 300) at t=345.
    assert all(r == 10 for t, r in history if t < 345)
    assert dict(history)[345] == 4


def test_a_policy_limiting_scale_down_to_one_pod_per_period() -> None:
    behavior = behavior_of({"behavior": {"scaleDown": {
        "stabilizationWindowSeconds": 600, "selectPolicy": "Min",
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]}}})
    down = behavior.scale_down
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=1, max_replicas=20, behavior=behavior))
    replicas, changes = 5, []
    for t in range(0, 3000, 15):
        value = 5.0 if t == 0 else 1.0  # 5 recommended at t=0, then 1
        new = hpa.sync(float(t), replicas, pods(replicas), {DESIRED.name: value}).desired
        if new != replicas:
            changes.append((t, new))
        replicas = new
    assert down.policies == (ScalingPolicy("Pods", 1, 300),)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(changes)]
    assert [r for _, r in changes] == [4, 3, 2, 1]
    assert changes[0][0] == down.stabilization_window_s  # the t=0 recommendation leaves the window
    assert all(gap >= 300 for gap in gaps)


def test_select_policy_min_takes_the_smaller_change_and_disabled_stops_scaling_down() -> None:
    # Docs: "to ensure that no more than 5 pods are removed per minute, add a second policy of 5 pods and
    # selectPolicy Min". From 100 pods: 10% is 10, 5 pods is 5 -> remove 5.
    rules = ScalingRules(0, "Min", (ScalingPolicy("Percent", 10, 60), ScalingPolicy("Pods", 5, 60)))
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), max_replicas=200,
                                          behavior=Behavior(DEFAULT_BEHAVIOR.scale_up, rules)))
    assert hpa.sync(0.0, 100, pods(100), {DESIRED.name: 10.0}).desired == 95
    disabled = Behavior(DEFAULT_BEHAVIOR.scale_up, ScalingRules(0, "Disabled", rules.policies))
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), max_replicas=200, behavior=disabled))
    assert hpa.sync(0.0, 100, pods(100), {DESIRED.name: 10.0}).desired == 100
    assert hpa.sync(15.0, 100, pods(100), {DESIRED.name: 150.0}).desired == 150  # scale-up still allowed


def test_external_value_and_average_value_targets() -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec((BUSY,), max_replicas=20))
    # Value: ratio 1.2 / 0.8 = 1.5 over the 4 Ready pods -> 6 (a starting pod does not count).
    assert hpa.sync(0.0, 5, pods(5, unready=1), {BUSY.name: 1.2}).proposals[BUSY.name] == 6
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), max_replicas=20))
    # AverageValue 1: the value divided by the 4 replicas is 1.5 per pod -> ceil(6 / 1) = 6.
    assert hpa.sync(0.0, 4, pods(4), {DESIRED.name: 6.0}).desired == 6
    # Within tolerance of the current 10 replicas: 10.5 / 10 = 1.05 -> hold.
    assert hpa.sync(15.0, 10, pods(10), {DESIRED.name: 10.5}).desired == 10


def test_the_largest_proposal_wins_and_a_failed_metric_blocks_only_scale_down() -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED, BUSY), max_replicas=20))
    both = hpa.sync(0.0, 4, pods(4), {DESIRED.name: 6.0, BUSY.name: 1.6})  # 6 and ceil(2 * 4) = 8
    assert (both.desired, both.metric) == (8, BUSY.name)
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED, BUSY), max_replicas=20, behavior=Behavior(
        DEFAULT_BEHAVIOR.scale_up, ScalingRules(0, "Max", DEFAULT_BEHAVIOR.scale_down.policies))))
    held = hpa.sync(0.0, 8, pods(8), {DESIRED.name: 2.0, BUSY.name: None})
    assert held.desired == 8 and "no scale-down" in held.reason
    up = hpa.sync(15.0, 8, pods(8), {DESIRED.name: 12.0, BUSY.name: None})
    assert up.desired == 12
    assert hpa.sync(30.0, 12, pods(12), {}).desired == 12  # nothing readable: hold


def test_missing_and_unready_pods_are_counted_conservatively() -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec((PER_POD,), max_replicas=20))
    # 3 of 4 pods report 50 against 100 (ratio 0.5, a scale-down); the missing one counts as at target:
    # (50 + 50 + 50 + 100) / 4 = 62.5 -> ceil(0.625 * 4) = 3, not the 2 the three alone would give.
    three = {"p0": 50.0, "p1": 50.0, "p2": 50.0}
    assert hpa.sync(0.0, 4, pods(4), {PER_POD.name: three}).proposals[PER_POD.name] == 3
    # 2 Ready pods at 200 (ratio 2) and 2 starting pods: those count as 0 -> (200 + 200) / 4 = 100: hold at 4.
    hot = {"p2": 200.0, "p3": 200.0}
    assert hpa.sync(15.0, 4, pods(4, unready=2), {PER_POD.name: hot}).proposals[PER_POD.name] == 4


def test_a_pod_without_a_utilization_counts_as_using_its_whole_request_on_a_scale_down() -> None:
    # 9 of 10 pods at 70% against 80%, the tenth Ready but not measured yet. A utilization target counts it at
    # 100% of its request: (9 * 70 + 100) / 10 = 73, ratio 0.9125, within the tolerance: hold at 10. A Pods
    # metric counts it at the target: (9 * 70 + 80) / 10 = 71, ratio 0.8875: ceil(8.875) = 9.
    nine = {f"p{i}": 70.0 for i in range(9)}
    utilization = MetricSpec("cpu", "Resource", "Utilization", 80.0)
    per_pod = MetricSpec("requests", "Pods", "AverageValue", 80.0)
    assert HorizontalPodAutoscaler(HpaSpec((utilization,), max_replicas=20)).sync(
        0.0, 10, pods(10), {"cpu": nine}).desired == 10
    assert HorizontalPodAutoscaler(HpaSpec((per_pod,), max_replicas=20)).sync(
        0.0, 10, pods(10), {"requests": nine}).desired == 9
    # A target above 100%: the missing pod counts at the target. 3 pods at 120% against 150%, one missing:
    # (360 + 150) / 4 = 127.5, read as 127: ratio 0.8467: ceil(3.39) = 4, a scale-down refused, hold at 4.
    over = MetricSpec("cpu", "Resource", "Utilization", 150.0)
    assert HorizontalPodAutoscaler(HpaSpec((over,), max_replicas=20)).sync(
        0.0, 4, pods(4), {"cpu": {"p0": 120.0, "p1": 120.0, "p2": 120.0}}).desired == 4


def test_a_utilization_is_read_in_whole_percent() -> None:
    # 3 pods at 88.5% against 80%: the controller divides integers and reads 88%, ratio 1.1, within the
    # tolerance: hold at 3 (88.5 / 80 = 1.106 would have scaled to ceil(3.32) = 4).
    hpa = HorizontalPodAutoscaler(HpaSpec((MetricSpec("cpu", "Resource", "Utilization", 80.0),), max_replicas=20))
    assert hpa.sync(0.0, 3, pods(3), {"cpu": even(3, 88.5)}).desired == 3
    assert hpa.sync(15.0, 3, pods(3), {"cpu": even(3, 89.0)}).desired == 4  # 89 / 80 = 1.1125: ceil(3.34)


def test_at_a_ratio_of_exactly_one_a_pod_without_a_metric_is_left_out() -> None:
    # 3 pods exactly at the target and a fourth not measured yet: neither a scale-up nor a scale-down, so the
    # controller fills in nothing and the ratio stays 1: hold at 4 (counting it as idle read 0.75: 3 pods).
    hpa = HorizontalPodAutoscaler(HpaSpec((PER_POD,), max_replicas=20))
    assert hpa.sync(0.0, 4, pods(4), {PER_POD.name: even(3, 100.0)}).desired == 4


def test_an_hpa_without_behavior_scales_by_the_controllers_older_rules() -> None:
    behavior = behavior_from_manifest({"kind": "HorizontalPodAutoscaler", "spec": {"maxReplicas": 40}})
    assert behavior is None
    # At most max(2 x current, 4) a sync: 1 -> 4, 2 -> 4, 3 -> 6, 10 -> 20 (the default behavior's
    # "100% or 4 pods per 15 s" would give 5, 6, 7 and 20).
    for current, expected in ((1, 4), (2, 4), (3, 6), (10, 20)):
        hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), 1, 40, behavior))
        assert hpa.sync(0.0, current, pods(current), {DESIRED.name: 30.0}).desired == expected
    # The highest recommendation of the last 300 s holds on the way up too: 12 asked at 4 pods (8 allowed),
    # then 10 asked at 8 pods: the window still holds 12 (the default behavior would go to 10).
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), 1, 40, behavior))
    assert hpa.sync(0.0, 4, pods(4), {DESIRED.name: 12.0}).desired == 8
    assert hpa.sync(15.0, 8, pods(8), {DESIRED.name: 10.0}).desired == 12
    # ... and on the way down for 300 s, a recommendation exactly 300 s old included: at 300 s the 12 asked at
    # 0 s, at 315 s the 10 asked at 15 s, then the 5s alone.
    assert hpa.sync(300.0, 12, pods(12), {DESIRED.name: 5.0}).desired == 12
    assert hpa.sync(315.0, 12, pods(12), {DESIRED.name: 5.0}).desired == 10
    assert hpa.sync(316.0, 10, pods(10), {DESIRED.name: 5.0}).desired == 5


def test_a_target_at_zero_replicas_is_left_there_unless_min_replicas_is_zero() -> None:
    held = HorizontalPodAutoscaler(HpaSpec((DESIRED,), 1, 10)).sync(0.0, 0, [], {DESIRED.name: 5.0})
    assert held.desired == 0 and "ScalingDisabled" in held.reason
    # minReplicas 0 (HPAScaleToZero): it scales from zero, asked for 5, as far as the default scale-up policies
    # allow from 0 pods: max(100% of 0, 4 pods) = 4.
    assert HorizontalPodAutoscaler(HpaSpec((DESIRED,), 0, 10)).sync(0.0, 0, [], {DESIRED.name: 5.0}).desired == 4


def test_replicas_stay_within_min_and_max() -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec((DESIRED,), min_replicas=2, max_replicas=6))
    up = hpa.sync(0.0, 4, pods(4), {DESIRED.name: 40.0})
    assert (up.desired, up.limited_by) == (6, "maxReplicas")
    assert hpa.sync(1000.0, 6, pods(6), {DESIRED.name: 0.0}).desired == 2


def test_manifest_behavior_fills_left_out_fields_with_kubernetes_defaults() -> None:
    behavior = behavior_of({"spec": {"behavior": {"scaleDown": {"policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 120}]}}}})
    assert behavior.scale_up == DEFAULT_BEHAVIOR.scale_up
    assert behavior.scale_down == ScalingRules(300, "Max", (ScalingPolicy("Pods", 2, 120),))
    assert behavior_from_manifest({"spec": {"behavior": {}}}) == DEFAULT_BEHAVIOR
    with pytest.raises(ValueError, match="selectPolicy"):
        behavior_from_manifest({"behavior": {"scaleUp": {"selectPolicy": "Fastest"}}})


def test_configurable_tolerance_per_direction_as_the_kubernetes_blog_example() -> None:
    # The v1.33 blog's HPA: scale-down tolerance 5%, none for scale-up. At 25 replicas a recommendation of 27
    # (ratio 1.08) is within the default 10% and held; with no scale-up tolerance the HPA goes to 27. A fall to
    # 23.5 (ratio 0.94) is past 5%: ceil(23.5) = 24; 24.0 (0.96) stays within it.
    behavior = behavior_of({"spec": {"behavior": {"scaleDown": {"tolerance": "50m"},
                                                             "scaleUp": {"tolerance": 0}}}})
    assert (behavior.scale_up.tolerance, behavior.scale_down.tolerance) == (0.0, 0.05)
    assert behavior.scale_up.policies == DEFAULT_BEHAVIOR.scale_up.policies  # the rest of each rule defaulted

    def decide(rules: Behavior, reading: float) -> int:
        spec = HpaSpec((DESIRED,), min_replicas=1, max_replicas=100, behavior=rules)
        return HorizontalPodAutoscaler(spec).sync(0.0, 25, pods(25), {DESIRED.name: reading}).desired

    assert decide(DEFAULT_BEHAVIOR, 27.0) == 25
    assert decide(behavior, 27.0) == 27
    down_now = Behavior(behavior.scale_up, ScalingRules(0, "Max", DEFAULT_BEHAVIOR.scale_down.policies, 0.05))
    assert decide(down_now, 23.5) == 24
    assert decide(down_now, 24.0) == 25
    assert decide(Behavior(behavior.scale_up, ScalingRules(0, "Max", DEFAULT_BEHAVIOR.scale_down.policies)),
                  23.5) == 25  # the default 10% holds it


@pytest.mark.parametrize("tolerance", ["-0.1", "ten percent", "NaN"])
def test_a_bad_tolerance_is_a_clear_error(tolerance: str) -> None:
    with pytest.raises(ValueError, match=r"behavior\.scaleUp: tolerance must be a quantity"):
        behavior_from_manifest({"behavior": {"scaleUp": {"tolerance": tolerance}}})
