"""Costs another writer set on the pods after this replica's write (`ForeignCosts`), and what the writer does of
them.

A cost another writer set after this replica's write, or removed (the watch shows a value it did not write, or
none, once it has shown the write itself: `foreign`), counts as not written: the pod is written again at once
where a scale-down waits on it, then at most once its minute while that writer keeps putting its value back. The
ranking hold trusts a write only once the watch shows it (`WrittenCosts.carried`): trusting it until the 5-minute
check, or the value it wrote over for 10 s as the watch's lag, let a scale-down go with the busiest pod carrying
the lowest cost by hand, or put back by a tool within those 10 s.
"""

from __future__ import annotations

import logging
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import replace

from autoscaler.actuation.deletion_cost_memory import ECHO_WAIT_S, WrittenCosts
from autoscaler.actuation.deletion_cost_plan import PodId, PodRecord
from autoscaler.actuation.removal_order import carried_cost
from autoscaler.log_lists import few

log = logging.getLogger("autoscaler.actuation.deletion_cost")


class ForeignCosts:
    """Tells another writer's cost on a pod from this replica's write and the pod watch's lag."""

    def __init__(self, memory: WrittenCosts, clock: Callable[[], float], min_interval_s: float) -> None:
        """`min_interval_s`: how often at most a pod is written again while another writer keeps putting its
        value back (`WriterSettings.min_interval_s`)."""
        self._memory = memory
        self._clock = clock
        self._min_interval_s = min_interval_s
        self._said: set[PodId] = set()  # pods carrying another writer's cost, or fought: said once a spell
        self._now: set[PodId] = set()  # pods carrying another writer's cost at the last plan

    def fighting(self, pod: PodId) -> bool:
        """Whether the pod carried another writer's cost at the last plan: a write of it now is written again
        for that value, at its minute from then on (`PodRecord.fought`)."""
        return pod in self._now

    def foreign(self, pod: PodId, record: PodRecord) -> int | None:
        """The cost another writer put on the pod after this replica wrote `record.cost` (a `kubectl annotate`,
        another tool; none, read as 0, where it removed the annotation), as the pod watch shows it; None where
        it shows this replica's write, or the pod is not watched (a pod just created, or no pod watch). Until the
        watch has shown the write itself (`PodRecord.echoed`), for `ECHO_WAIT_S`, another value is the pod as it
        was before the write, the watch behind or relisting: no time window after the write, which a tool that
        puts its value back within it got through. The value of a PATCH that got no answer is this replica's own
        (`PodRecord.unanswered`): an API server slow to commit lands it after the client gave up, and it was said
        as another writer's, sending the user after a tool that was not there."""
        memory = self._memory
        if record.cost is None or not memory.watched(pod):
            return None
        shown = memory.on_pod(pod)
        cost = carried_cost(shown)
        if cost == record.cost:
            if shown is not None:
                record.echoed = True  # (not the namespace's watch: the pod may have shown it before the write)
            return None
        if not record.echoed and (self._clock() - record.written_at < ECHO_WAIT_S
                                  or memory.watch_behind(pod, record)):
            return None
        if shown in {str(sent) for sent in record.unanswered}:
            return None  # a PATCH of this replica's that got no answer, committed after all
        return cost

    def as_on_pods(self, now: float) -> Mapping[PodId, PodRecord]:
        """The records to plan by, with the cost another writer set on a pod in place of this replica's
        (`foreign`): such a pod is written again as a changed cost is (at once where a scale-down waits on it,
        else at the pod's minute), not only at its 5-minute check; once written again for another writer's value
        (`PodRecord.fought`), at most once its minute even where its runtime's writes are hurried: a tool that
        puts its value back after each write was written at every refresh. Said once a spell, at INFO, with the
        annotation as it is on the pod."""
        wait = self._min_interval_s
        records = self._memory.records
        overwritten: dict[PodId, PodRecord] = {}
        behind: list[PodId] = []
        for pod, record in records.items():
            cost = self.foreign(pod, record)
            if cost is None and self._memory.unshown(pod, record, now):
                behind.append(pod)
            if cost is not None:
                retry_at = max(record.retry_at, record.written_at + wait) if record.fought else record.retry_at
                overwritten[pod] = replace(record, cost=cost, retry_at=retry_at)
            elif record.fought and record.echoed and now - record.written_at >= wait:
                record.fought = False  # its write stayed a minute: that writer stopped
        self._now = set(overwritten)
        self._memory.say_behind(behind)
        news = [pod for pod in overwritten if pod not in self._said]
        self._said = self._now | {pod for pod, record in records.items() if record.fought}
        if news:
            log.info("deletion costs: %d pods carry a cost another writer set after this replica's, or removed "
                     "(kubectl annotate, another tool), which the ReplicaSet removes by; writing them again, then "
                     "at most once a minute while it puts its own back: %s",
                     len(news), few([f"{ns}/{name} ({self._memory.shown((ns, name))})" for ns, name in news]))
        return ChainMap(overwritten, records) if overwritten else records
