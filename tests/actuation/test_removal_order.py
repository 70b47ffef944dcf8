"""Property: `misplaced_removals` names a pod exactly when some choice the ReplicaSet may make (not-Ready pods first,
then the lowest carried cost, ties in any order) removes a pod while a less needed one stays; `turned_removals` the
same among ranked pods (a pod whose data is stale has no need to compare)."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.actuation.removal_order import PodCosts, misplaced_removals, turned_removals

COSTS = st.sampled_from([0, 100, 200, 300])
RANKED = st.one_of(st.none(), COSTS)
PODS = st.lists(st.tuples(st.booleans(), COSTS, COSTS), min_size=1, max_size=6).map(
    lambda rows: [PodCosts(f"pod-{i}", ready, ranked, carried) for i, (ready, ranked, carried) in enumerate(rows)])


def a_choice_removes_a_needed_pod(pods: list[PodCosts], removing: int, unranked_counts: bool = True) -> bool:
    def order(pod: PodCosts) -> tuple[bool, int]:
        return pod.ready, pod.carried

    def judged(pod: PodCosts) -> bool:
        return pod.ready and (unranked_counts or pod.ranked is not None)

    for going in combinations(pods, min(removing, len(pods))):
        staying = [pod for pod in pods if pod not in going]
        if staying and max(map(order, going)) > min(map(order, staying)):
            continue  # not a choice the ReplicaSet makes
        ready_going = [pod.ranked or 0 for pod in going if judged(pod)]
        ready_staying = [pod.ranked or 0 for pod in staying if judged(pod)]
        if ready_going and ready_staying and max(ready_going) > min(ready_staying):
            return True
    return False


@given(PODS, st.integers(min_value=1, max_value=6))
def test_a_pod_is_named_exactly_when_the_replicaset_may_remove_it_before_a_less_needed_one(
        pods: list[PodCosts], removing: int) -> None:
    assert bool(misplaced_removals(pods, removing)) == a_choice_removes_a_needed_pod(pods, removing)


@given(st.lists(st.tuples(st.booleans(), RANKED, COSTS), min_size=1, max_size=6).map(
    lambda rows: [PodCosts(f"pod-{i}", ready, ranked, carried) for i, (ready, ranked, carried) in enumerate(rows)]),
    st.integers(min_value=1, max_value=6))
def test_a_turn_is_named_exactly_when_the_replicaset_may_remove_a_ranked_pod_before_a_less_needed_ranked_one(
        pods: list[PodCosts], removing: int) -> None:
    named = turned_removals(pods, removing)
    assert bool(named) == a_choice_removes_a_needed_pod(pods, removing, unranked_counts=False)
    assert all(pod.ranked is not None for pod in pods if pod.name in named)
