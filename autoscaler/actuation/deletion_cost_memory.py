"""What the deletion-cost writer remembers of its writes (`WrittenCosts`), and what the pod watch shows of them.

A write is not trusted until the pod watch shows it (its echo): until then the value the watch shows may be the
pod as it was before, the watch behind or relisting. The echo is recorded from the watch's events as they come
(`DeletionCostEvents`), and per namespace the latest write echoed tells a watch that works from one that is
behind or connected but stalled (`watch_behind`). What another value on the pod means, once the echo came, is
`autoscaler.actuation.deletion_cost_foreign`'s.
What was written is remembered with the pod's uid (`cluster.pod_uid`): a pod deleted and created again under its
name (a controller that reuses names) is a new object without the annotation, and is written at the next pass as
a new pod is, not at the 5-minute rewrite (`recreated`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Final

from autoscaler.actuation.cluster_pods import ClusterPods, DeletionCostEvents
from autoscaler.actuation.deletion_cost_plan import PodId, PodRecord
from autoscaler.actuation.removal_order import carried_cost
from autoscaler.log_lists import few

log = logging.getLogger("autoscaler.actuation.deletion_cost")

ECHO_WAIT_S: Final = 60.0
"""How long after a write the pod watch, not having shown it yet (its echo), may still show the pod as it was
before: a watch behind, or relisting, which may skip the write's own event. Until then another value on the pod
is that lag, not another writer's; after it, what the watch shows counts, unless the watch of the pod's namespace
has shown none of this replica's writes since (`watch_behind`: behind, or stalled). The echo is recorded from the
watch's events as they come (`DeletionCostEvents`). No other time window: a tool that puts its value back seconds
after each write was taken for the watch's lag for 10 s, and got past the ranking hold."""


class WrittenCosts:
    """The records of what this replica wrote on each pod, and the pod watch's view of them."""

    def __init__(self, cluster: ClusterPods | None, clock: Callable[[], float]) -> None:
        """`cluster`: the pods as discovery's pod watch sees them (their annotation and uid); None (a targets
        file): nothing is shown, every write is taken as written."""
        self.cluster = cluster
        self._clock = clock
        self.records: dict[PodId, PodRecord] = {}
        self._echoes: dict[str, float] = {}  # per namespace, the latest write whose echo the pod watch showed
        self._behind: set[str] = set()  # namespaces whose watch shows none of the writes for ECHO_WAIT_S, said once
        if isinstance(cluster, DeletionCostEvents):
            cluster.on_deletion_cost(self._shown_by_watch)

    def clear(self) -> None:
        """Forget everything (leadership lost): a term leading again says a stalled watch again."""
        self.records.clear()
        self._echoes.clear()
        self._behind.clear()

    def on_pod(self, pod: PodId) -> str | None:
        """The annotation on the pod as the pod watch last saw it (None: none, or no pod watch)."""
        return self.cluster.deletion_cost(*pod) if self.cluster is not None else None

    def shown(self, pod: PodId) -> str:
        """The annotation on the pod as the pod watch shows it, as it is written there (`none`: removed)."""
        shown = self.on_pod(pod)
        return "none" if shown is None else shown

    def uid(self, pod: PodId) -> str | None:
        return self.cluster.pod_uid(*pod) if self.cluster is not None else None

    def watched(self, pod: PodId) -> bool:
        """Whether the pod watch has the pod (then a missing annotation is one removed, which the ReplicaSet reads
        as 0, not one not known)."""
        return self.cluster is not None and self.cluster.pod_uid(*pod) is not None

    def carried(self, pod: PodId, leading: bool) -> int:
        """The cost on the pod as the ReplicaSet reads it: what the pod watch shows (a pod it watches without the
        annotation: 0), else, on the leader, what it wrote (a pod not watched yet, or no pod watch). The leader
        does not take its own write for in place before the watch shows it: the value the watch shows meanwhile
        may be the watch's lag or another writer's put back at once, and trusting the write (for 5 minutes, then
        for 10 s) let a scale-down go with the busiest pod carrying the lowest cost."""
        record = self.records.get(pod) if leading else None
        if record is not None and record.cost is not None:
            if not self.watched(pod):
                return record.cost
            shown = self.on_pod(pod)
            cost = carried_cost(shown)
            if cost == record.cost and shown is not None:
                record.echoed = True  # (not the namespace's watch: the pod may have shown it before the write)
            return cost
        return carried_cost(self.on_pod(pod))

    def recreated(self) -> list[PodId]:
        """The pods written whose name the pod watch now shows on another object (another uid)."""
        if self.cluster is None:
            return []
        uid_of = self.cluster.pod_uid
        return [pod for pod, record in self.records.items()
                if record.uid is not None and (uid := uid_of(*pod)) is not None and uid != record.uid]

    def _shown_by_watch(self, namespace: str, name: str, annotation: str | None) -> None:
        """The pod watch shows the pod with `annotation` (`DeletionCostEvents`, on the event loop): this replica's
        write, or the one under way, is echoed when that is its value, as the event comes. Looked for only at each
        pass, the echo of a write that another writer's value followed within the refresh was never seen, and
        that value was taken for the watch's lag for `ECHO_WAIT_S` while the ranking hold ran out."""
        pod = (namespace, name)
        record = self.records.get(pod)
        if record is None or annotation is None:
            return
        if record.sending is not None and annotation == str(record.sending):
            record.sent_echoed = True
        if record.cost is not None and annotation == str(record.cost):
            self.echoed(pod, record)

    def echoed(self, pod: PodId, record: PodRecord) -> None:
        """The pod watch's event has shown `record.cost` since it was written: a different value is another
        writer's from now on; and the watch of the pod's namespace works up to that write (`watch_behind`). Only
        an event says the latter: a pass that finds the value on the pod may find what it carried before the
        write (a ranking turned back, a no-op PATCH that sends no event), and took a stalled watch for working."""
        if record.echoed:
            return
        record.echoed = True
        namespace = pod[0]
        if record.written_at > self._echoes.get(namespace, -math.inf):
            self._echoes[namespace] = record.written_at
        self._behind.discard(namespace)

    def watch_behind(self, pod: PodId, record: PodRecord) -> bool:
        """Whether the pod watch has shown none of this replica's writes in the pod's namespace since `record`
        was written: behind, or connected but stalled. Another value it shows is then the pod as it was, not
        another writer's: a watch that delivered nothing made every write another writer's after `ECHO_WAIT_S`
        (300 pods: 270 PATCHes a minute, lines naming them all, the hold said `overwritten`)."""
        return self._echoes.get(pod[0], -math.inf) < record.written_at

    def unshown(self, pod: PodId, record: PodRecord, now: float) -> bool:
        """Whether the pod watch, behind or stalled, shows the pod as it was before a write of `ECHO_WAIT_S` ago."""
        return (record.cost is not None and not record.echoed and now - record.written_at >= ECHO_WAIT_S
                and self.watched(pod) and self.watch_behind(pod, record)
                and carried_cost(self.on_pod(pod)) != record.cost)

    def say_behind(self, pods: list[PodId]) -> None:
        """Say once, until it shows one of them, that a namespace's pod watch shows none of this replica's writes
        there: neither another writer's values (the pods are not written again before their 5-minute rewrite)
        nor a reason to trust them (the ranking hold waits for them, up to its bound)."""
        news = [pod for pod in pods if pod[0] not in self._behind]
        if not news:
            return
        self._behind |= {namespace for namespace, _ in news}
        log.warning("deletion costs: the pod watch has shown none of this replica's writes of %.0f s and more in "
                    "%s (behind, or connected but stalled): the %d pods it shows as they were are taken for its lag, "
                    "not for a value set by hand or by a tool, and are not written again before their usual "
                    "rewrite; a scale-down waiting on them waits up to the ranking hold's bound: %s", ECHO_WAIT_S,
                    few(sorted({namespace for namespace, _ in news})), len(news),
                    few([f"{ns}/{name}" for ns, name in news]))
