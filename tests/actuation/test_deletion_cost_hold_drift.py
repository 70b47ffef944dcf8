"""Load drifting slowly onto the pod carrying the lowest deletion cost (one bucket a refresh) while
`modelmesh_desired_replicas` stays below what runs: the ReplicaSet never gets to remove a pod the ranking clearly
needs (more than a cost bucket above one that stays), whether every PATCH is accepted or that pod's are refused
(503) throughout. Requests-only weights (`need_weight_cache: 0`), where one request-rate step is a bucket. A rule
that holds only for a pod clearly misplaced at two refreshes in a row must not miss a turn this slow; and the pod
whose load falls meanwhile must have its lower cost written in time, or the ReplicaSet keeps a less needed pod.

The real refresher, hold and writer; the pods' annotations are kept by the property test's stand-in for the API
server's PATCH."""

from __future__ import annotations

import math

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.ranking import COST_SPACING
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock
from tests.actuation.fleet_load import FleetLoad, clearly_needed_may_go, ranking
from tests.actuation.test_deletion_cost_hold_property import PodAnnotations

POLICY = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0, need_weight_cache=0.0)
PODS = tuple(f"pod-{i:02d}" for i in range(5))
STEPS = 12


@pytest.mark.parametrize("refused", [None, 503], ids=["accepted", "pod-00 refused 503"])
async def test_load_drifting_onto_the_lowest_cost_pod_never_lets_the_replicaset_remove_it(refused: int | None) -> None:
    clock = SteppedClock(1_700_000_000.0)
    source, api = FleetLoad(PODS), PodAnnotations()
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(POLICY), metrics, clock=clock, monotonic=clock)
    writer = DeletionCostWriter(api, metrics, settings=WriterSettings(qps=None), clock=clock, rand=lambda: 1.0)
    refresher.cost_writes = writer  # as `DeletionCostActuator.start` wires it
    source.load = {"pod-00": 0.0} | dict.fromkeys(PODS[1:], 60.0)  # 240 req/s: 3 of 5; pod-00 idle, costs least
    await refresher.refresh_once()
    await writer.sync()
    if refused is not None:
        api.refusing = {"pod-00": refused}
    trace = []
    for step in range(1, STEPS + 1):
        clock.advance(15.0)
        source.load = {"pod-00": min(60.0, 7.0 * step)} | dict.fromkeys(PODS[1:4], 60.0) | {"pod-04": 60.0 - 2 * step}
        await refresher.refresh_once()
        view = refresher.views[KEY]
        value = view.values[ServedMetric.DESIRED_REPLICAS].value
        assert value is not None
        removing = len(PODS) - math.ceil(value)
        carried = {pod: int(api.costs.get(pod, "0")) for pod in PODS}
        wrong = clearly_needed_may_go(ranking(view), carried, removing, COST_SPACING) if removing > 0 else ""
        trace.append(f"{15 * step} s: serves {value:g}, ranked {ranking(view)}, carried {carried} {wrong}")
        assert not wrong, "\n".join(trace)
        await writer.sync()
