"""Property: whatever the load does and whichever cost PATCHes are refused (503, 403) or throttled (429 with
Retry-After), within `COST_HOLD_MAX_S` the served `modelmesh_desired_replicas` falls so that the HPA removes pods
only when every choice the ReplicaSet may make by the costs on the pods removes least-needed pods: by this refresh's
ranking, or, when the decided value already removed them at the last refresh (the writer had that ranking to write),
by that refresh's ranking. Ties are equal both ways: pods of one carried cost may go in any order, pods of one
ranked cost are equally needed. The Deployment may ask for more replicas than the 3 pods it runs (two never created:
a quota, a webhook): the ReplicaSet removes its pods beyond the replicas asked, and counted as the Deployment's
replicas less those asked, the hold saw every pod go and let a fall remove the busy one (s57 on-call, rt4). Or for
fewer than the 3 to 5 Ready pods it runs (a rolling update's surge pods, its old and new ReplicaSets'): lowering the
replicas removes the replicas less those asked, not every pod beyond them; counted as all the pods less those asked,
the three tied at the lowest cost all went, and a fall could remove the busy one (s57 rvh, `rollout_hidden`). Each
ReplicaSet removes its own pods by their costs; the property takes the pods as one ReplicaSet's, one of the splits.

The refresher, the decision, the hold and the writer are the real ones; the pods' annotations are kept by a small
stand-in for the API server's PATCH (the HTTP fake is too slow for hundreds of random runs)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from itertools import combinations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeApiError
from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.names import DELETION_COST_ANNOTATION, ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.ranking_hold import COST_HOLD_MAX_S
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from tests.actuation.conftest import KEY, SteppedClock

PODS = ("pod-a", "pod-b", "pod-c")
SURGE = ("pod-d", "pod-e")
"""Ready pods a rolling update may run beside `PODS`, beyond the Deployment's replicas."""
ALL = PODS + SURGE
REFRESH_S = 15.0
POLICY = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0)


class PodAnnotations:
    """The pods' deletion costs as the API server keeps them; PATCHes of the pods in `refusing` get its status."""

    def __init__(self) -> None:
        self.costs: dict[str, str] = {}
        self.refusing: dict[str, int] = {}

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        status = self.refusing.get(name)
        if status is not None:
            raise KubeApiError(f"pods {name}: {status}", status=status, retry_after_s=0.01 if status == 429 else None)
        self.costs[name] = annotations[DELETION_COST_ANNOTATION]


class Load(SourceDefaults):
    name = "stand-in"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.pods: tuple[str, ...] = PODS
        self.rps: tuple[float, ...] = (100.0,) * len(ALL)
        self.replicas = len(PODS)

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(name, sampled_at=now - 1, requests_per_second=rps, queue_delay_s=0.0, lru_age_s=900.0,
                               cache_used_ratio=0.5, models_loaded=3.0)
                     for name, rps in zip(self.pods, self.rps, strict=False))
        return [RuntimeSnapshot(KEY, pods, now, replicas=self.replicas)]

    async def close(self) -> None:
        return None


STEPS = st.lists(st.tuples(
    st.tuples(*[st.sampled_from([0.0, 10.0, 40.0, 90.0, 150.0])] * len(ALL)),
    st.dictionaries(st.sampled_from(ALL), st.sampled_from([503, 403, 429]), max_size=len(ALL)),
), min_size=1, max_size=int(COST_HOLD_MAX_S // REFRESH_S))


def least_needed_go(ranked: Mapping[str, int], carried: Mapping[str, str], removing: int,
                    pods: tuple[str, ...] = PODS) -> bool:
    """Whether every set of `removing` pods the ReplicaSet may remove (lowest carried cost first, ties in any
    order) is one of least-needed pods by `ranked`."""
    cost = {pod: int(carried.get(pod, "0")) for pod in pods}
    for going in combinations(pods, removing):
        staying = [pod for pod in pods if pod not in going]
        if max(cost[pod] for pod in going) > min(cost[pod] for pod in staying):
            continue  # not a choice the ReplicaSet makes
        if max(ranked[pod] for pod in going) > min(ranked[pod] for pod in staying):
            return False
    return True


class Said(logging.Handler):
    """The hold's log lines of one refresh (caplog is a function-scoped fixture, which hypothesis refuses)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> Said:
        hold = logging.getLogger("autoscaler.ranking_hold")
        self._level = hold.level
        hold.setLevel(logging.INFO)
        hold.addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        hold = logging.getLogger("autoscaler.ranking_hold")
        hold.removeHandler(self)
        hold.setLevel(self._level)


def ranking(view: RuntimeView) -> dict[str, int]:
    return {name: cost for name, ready, fresh, cost in view.pods.deletion_costs()
            if ready and fresh and cost is not None}


async def run(steps: list[tuple[tuple[float, ...], dict[str, int]]], replicas: int = len(PODS),
              surge: int = 0) -> None:
    clock = SteppedClock(1_700_000_000.0)
    source, api = Load(), PodAnnotations()
    pods = source.pods = ALL[:len(PODS) + surge]
    source.replicas = replicas
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(POLICY), metrics, clock=clock, monotonic=clock)
    writer = DeletionCostWriter(api, metrics, settings=WriterSettings(qps=None), clock=clock, rand=lambda: 1.0)
    refresher.cost_writes = writer  # as `DeletionCostActuator.start` wires it
    await refresher.refresh_once()
    await writer.sync()
    before = refresher.views[KEY]
    for rps, refusing in steps:
        clock.advance(REFRESH_S)
        source.rps, api.refusing = rps, refusing
        with Said() as said:
            await refresher.refresh_once()
        view = refresher.views[KEY]
        if any(line.startswith("deletion costs written") for line in said.lines):  # said only where they are
            assert {pod: str(cost) for pod, cost in ranking(view).items()} == api.costs, (said.lines, api.costs)
        served, now = (v.values[ServedMetric.DESIRED_REPLICAS] for v in (before, view))
        assert served.value is not None and now.value is not None and served.raw is not None
        running = min(len(pods), replicas)  # surge pods beyond the replicas are not removed by lowering them
        removing = running - math.ceil(now.value)
        if now.value < min(served.value, replicas) and removing > 0:
            # With tau 0 `raw` is the value as decided, before any hold.
            handed = (removing <= running - math.ceil(served.raw)
                      and least_needed_go(ranking(before), api.costs, removing, pods))
            assert handed or least_needed_go(ranking(view), api.costs, removing, pods), (
                f"served {served.value} -> {now.value} with costs {api.costs}, ranking {ranking(view)}, "
                f"the last refresh's {ranking(before)}")
        before = view
        await writer.sync()


@settings(max_examples=60, deadline=None)
@given(STEPS, st.integers(len(PODS), len(PODS) + 3), st.integers(0, len(SURGE)))
@example(  # s57 rvh `rollout_hidden`: 3 replicas, 5 pods carrying 3 tied lowest costs, the load onto one of them
    [((10.0, 20.0, 30.0, 80.0, 90.0), {})] * 5 + [((40.0, 5.0, 5.0, 50.0, 50.0), dict.fromkeys(ALL, 403))], 3, 2)
def test_the_served_replicas_fall_only_onto_an_order_that_removes_least_needed_pods(
        steps: list[tuple[tuple[float, ...], dict[str, int]]], replicas: int, surge: int) -> None:
    asyncio.run(run(steps, replicas, surge))
