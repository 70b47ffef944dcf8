"""Which patches a deletion-cost pass sends (`DuePatches`): the pure rules of `deletion_cost_plan` applied to what
was written, with the runtimes newly scaled down made urgent, and the costs already on the pods left out.

Writes happen only while leading; losing it forgets what was written, so a new term starts by writing every pod
once, but for the pods that already carry the cost it would write (`cluster.deletion_cost`, the annotation as
discovery's pod watch last saw it): after a failover or a rolling upgrade at 50,000 pods those were a 40-minute
backlog of patches at the qps limit that changed nothing, each a pod update sent to every pod watcher of the
cluster. For the same reason the 5-minute rewrite of an unchanged cost is sent only where the watch shows the pod
carrying something else (`skip_costs_in_place`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping

from autoscaler.actuation.deletion_cost_foreign import ForeignCosts
from autoscaler.actuation.deletion_cost_memory import WrittenCosts
from autoscaler.actuation.deletion_cost_plan import (
    PERIODIC,
    PodId,
    PodPatch,
    PodRecord,
    plan_patches,
    scale_down_pending,
)
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger("autoscaler.actuation.deletion_cost")


class DuePatches:
    """Plans each pass's patches against the newest views."""

    def __init__(self, memory: WrittenCosts, foreign: ForeignCosts, metrics: AdapterMetrics, *,
                 namespaces: Collection[str], min_interval_s: float, max_interval_s: float,
                 rand: Callable[[], float]) -> None:
        """`namespaces`: the only ones written in (empty: all); the intervals as `WriterSettings` says."""
        self._memory = memory
        self._foreign = foreign
        self._metrics = metrics
        self._namespaces = frozenset(namespaces)
        self._min_interval_s = min_interval_s
        self._max_interval_s = max_interval_s
        self._rand = rand
        self._scale_downs: dict[RuntimeKey, tuple[int, int]] = {}
        self._forgetting: set[RuntimeKey] = set()  # runtimes gone or created again, forgotten at the next pass

    def forget(self, key: RuntimeKey) -> None:
        """The runtime is gone, or was created again under its name: forgotten at the next pass (`start`)."""
        self._forgetting.add(key)

    def clear(self) -> None:
        """Leadership lost: every scale-down is news again in the next term."""
        self._scale_downs.clear()
        self._forgetting.clear()

    def start(self) -> None:
        """A pass starts, on the event loop: a scale-down of a runtime forgotten since is news again."""
        forgetting, self._forgetting = self._forgetting, set()
        for key in forgetting:
            self._scale_downs.pop(key, None)

    def cut_off(self, patches: list[PodPatch]) -> None:
        """`patches` were not sent (the batch, or newer views): the urgent ones are still urgent next pass."""
        for patch in patches:
            if patch.priority == 0:
                self._scale_downs.pop(patch.runtime, None)

    def plan(self, views: Mapping[RuntimeKey, RuntimeView], now: float,
             held: frozenset[RuntimeKey]) -> tuple[list[tuple[PodId, PodRecord]], list[PodPatch]]:
        """(the records taken out: pods no longer in the views, or created again; the patches due): all the
        per-pod work of a pass, for a thread. `held`: runtimes whose scale-down waits for their costs, written
        at once (not after the per-pod minute) so that it waits one refresh."""
        records = self._memory.records
        if self._namespaces:
            views = {key: view for key, view in views.items() if key.namespace in self._namespaces}
        present = {(key.namespace, name) for key, view in views.items() for name, *_ in view.pods.deletion_costs()}
        gone = [(pod, records.pop(pod)) for pod in [pod for pod in records if pod not in present]]
        recreated = self._memory.recreated()
        gone += [(pod, records.pop(pod)) for pod in recreated]
        if recreated:
            log.info("deletion costs: %d pods were deleted and created again under their names (a new uid, "
                     "without the annotation written on the old one); writing them as new pods: %s",
                     len(recreated), few([f"{ns}/{name}" for ns, name in recreated]))
        return gone, plan_patches(views, self._foreign.as_on_pods(now), self._urgent(views) | held, now,
                                  min_interval_s=self._min_interval_s, max_interval_s=self._max_interval_s)

    def settle_carried(self, views: Mapping[RuntimeKey, RuntimeView], failing: Collection[PodId],
                       now: float) -> list[PodId]:
        """The pods of `failing` (a write that failed, not yet made good) that carry the cost wanted now, as
        discovery's pod watch shows it; their records count as written now, their failure over.

        A refused write of a cost no longer wanted (the pod's need moved back to the bucket already on it) has
        nothing left to write: its failure stayed open until its retry, up to 5 minutes on (or for good where a
        Lease hand-over came first), so the refusal was never said to be over, a new refusal in its namespace was
        taken for the one already warned about (at DEBUG), and the retry PATCHed what the pod carried. Only a pod
        the writer would write now (Ready, fresh, its runtime's values known) has a cost wanted. A pod with a PATCH
        of another value still unanswered is not settled: that PATCH may yet land, and it is this replica's own
        (`PodRecord.unanswered`, which settling would forget: it was then said as another writer's); its retry
        writes the cost wanted over it."""
        memory = self._memory
        if not failing or memory.cluster is None:
            return []
        namespaces = {namespace for namespace, _ in failing}
        settled: list[PodId] = []
        for key, view in views.items():
            if key.namespace not in namespaces or not view.known:
                continue
            for name, ready, fresh, cost in view.pods.deletion_costs():
                pod = (key.namespace, name)
                record = memory.records.get(pod)
                if (pod not in failing or record is None or cost is None or not ready or not fresh
                        or memory.on_pod(pod) != str(cost) or any(sent != cost for sent in record.unanswered)):
                    continue
                record.cost, record.written_at, record.uid, record.echoed = cost, now, memory.uid(pod), True
                record.retry_at, record.refused, record.unanswered = -math.inf, None, ()
                record.in_a_row.reset()
                settled.append(pod)
        return settled

    def skip_costs_in_place(self, patches: list[PodPatch], now: float) -> list[PodPatch]:
        """The patches without those whose cost the pod already carries, as discovery's pod watch last saw it.

        A first write whose cost is in place (a previous leader wrote it) counts as written at a random moment
        of the last `max_interval_s`, so that the periodic checks of a new term spread out instead of all
        falling due together. A periodic rewrite whose cost is in place counts as done now: the watch shows
        the pod as the cluster has it, so the rewrite would repair nothing (a hand edit or a lost write shows
        there as another value, and is written). At 10,000 pods those rewrites alone were 33 patches a second,
        over the writer's qps, each a pod update sent to every pod watcher of the cluster."""
        memory = self._memory
        if memory.cluster is None:
            return patches
        kept: list[PodPatch] = []
        adopted = checked = 0
        for patch in patches:
            pod = (patch.namespace, patch.pod)
            first = pod not in memory.records
            if not (first or patch.priority == PERIODIC) or memory.on_pod(pod) != str(patch.cost):
                kept.append(patch)
                continue
            if first:
                memory.records[pod] = PodRecord(cost=patch.cost, uid=memory.uid(pod), echoed=True,
                                                written_at=now - self._rand() * self._max_interval_s)
                self._metrics.pod_deletion_cost.labels(*pod).set(patch.cost)
                adopted += 1
            else:
                record = memory.records[pod]
                record.written_at, record.uid, record.echoed = now, memory.uid(pod), True
                checked += 1
        if adopted:
            log.info("deletion costs: %d pods already carry the cost this replica would write; left as they are",
                     adopted)
        if checked:
            log.debug("deletion costs: %d pods due for their periodic check still carry their cost", checked)
        return kept

    def _urgent(self, views: Mapping[RuntimeKey, RuntimeView]) -> set[RuntimeKey]:
        """The runtimes newly about to be scaled down; one log line for all of them (a fleet-wide drop in load
        makes thousands urgent in one refresh)."""
        urgent: dict[RuntimeKey, tuple[int, int]] = {}
        for key, view in views.items():
            pair = scale_down_pending(view) if view.known else None
            if pair is None:
                self._scale_downs.pop(key, None)
            elif self._scale_downs.get(key) != pair:
                self._scale_downs[key] = urgent[key] = pair
        if len(urgent) == 1:
            [(key, (wanted, current))] = urgent.items()
            log.info("runtime %s: recommendation %d is below %d replicas; writing deletion costs now",
                     key, wanted, current)
        elif urgent:
            log.info("%d runtimes' recommendations are below their replicas; writing deletion costs now: %s",
                     len(urgent), few([f"{key} ({wanted} < {current})" for key, (wanted, current) in urgent.items()]))
        return set(urgent)
