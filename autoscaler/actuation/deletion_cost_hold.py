"""What the ranking hold asks of the deletion-cost writer (`HoldAnswers`; `autoscaler.ranking_hold` says why it
holds): whether the costs on a runtime's pods make the ReplicaSet remove the pods its ranking needs least, which
pods do not carry their ranked cost yet, and why not.

The refresh asks before it lets a runtime's replica count fall: a scale-down waits while the ReplicaSet would
remove a pod the ranking still needs and a write that fixes it is still to come; such a runtime's writes are
urgent (`take_urgent`). So are those of a runtime whose ranking clearly turned after its value fell
(`hurry_turned`: the load moved onto a pod the ReplicaSet would remove, by more than load noise moves it): nothing
holds there, and an HPA without scale-down stabilization acts at its next sync, so the costs must not wait their
per-pod minute.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from autoscaler.actuation.deletion_cost_foreign import ForeignCosts
from autoscaler.actuation.deletion_cost_memory import ECHO_WAIT_S, WrittenCosts
from autoscaler.actuation.deletion_cost_plan import PodId
from autoscaler.actuation.removal_order import PodCosts, carried_cost, misplaced_removals, turned_removals
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.policies.ranking import COST_SPACING
from autoscaler.ranking_hold import CostsPending, HoldReason


def _pod_costs(view: RuntimeView, carried: Mapping[str, int]) -> list[PodCosts]:
    """The pods of `carried` with the costs `view` ranks them at (a pod it does not rank: not ranked)."""
    ranked = {name: (ready, cost if ready and fresh else None)
              for name, ready, fresh, cost in view.pods.deletion_costs()}
    return [PodCosts(name, *ranked.get(name, (True, None)), cost) for name, cost in carried.items()]


def _unwritten(view: RuntimeView, carried: Mapping[str, int]) -> list[str]:
    """The Ready, fresh pods of `view` whose ranked cost is not the one they carry."""
    return [name for name, ready, fresh, cost in view.pods.deletion_costs()
            if ready and fresh and cost is not None and cost != carried[name]]


class HoldAnswers:
    """Answers the ranking hold from what was written (`WrittenCosts`) and what the pod watch shows."""

    def __init__(self, memory: WrittenCosts, foreign: ForeignCosts, throttle: ServerThrottle, *,
                 namespaces: Collection[str], may_write: Callable[[], bool], clock: Callable[[], float]) -> None:
        """`namespaces`: the only ones written in (empty: all); `throttle`: the writer's, whose `Retry-After` a
        held scale-down is told it waits on."""
        self._memory = memory
        self._foreign = foreign
        self._throttle = throttle
        self._namespaces = frozenset(namespaces)
        self._may_write = may_write
        self._clock = clock
        self._holding: set[RuntimeKey] = set()  # held or turned so far in the refresh under way

    def take_urgent(self) -> frozenset[RuntimeKey]:
        """The runtimes held or turned since the last call (the refresh under way, as it offers its views): their
        writes are urgent until the next refresh."""
        holding, self._holding = frozenset(self._holding), set()
        return holding

    def misordered(self, key: RuntimeKey, view: RuntimeView, removing: int,
                   handed: RuntimeView | None) -> CostsPending | None:
        """What a scale-down removing `removing` pods waits on (`autoscaler.ranking_hold`), or None: when the pods
        the ReplicaSet would remove by the costs on them are among the least needed by `view`'s ranking; when they
        are among the least needed by `handed`'s ranking (the last refresh that decided the scale-down, across
        refreshes without data: the writer had its turn to write it) (a newer ranking's moves are load
        noise, written at the pod's minute: waiting for them held every scale-down under noise); and when
        nothing can be known (a runtime outside `--namespaces`; a replica not leading, without the pod watch: a
        targets file). The costs on the pods: the pod watch's, or what this replica wrote while leading where the
        watch does not have the pod (`WrittenCosts.carried`).

        A replica not leading judges by the pod watch, within one cost bucket: the HPA reads every replica through
        the Service, and a replica that held nothing let a read of it remove the pod the leader's hold kept. Its
        ranking comes from its own scrape, which may put a pod a bucket from where the leader put it, a
        difference the leader never writes away."""
        if not self._judges(key, view):
            return None
        leading = self._may_write()
        cluster = self._memory.cluster
        if not leading and cluster is None:
            return None
        slack = 0 if leading else COST_SPACING
        carried = self._carried_by(key, view, leading)
        misplaced = misplaced_removals(_pod_costs(view, carried), removing, slack)
        if handed is not None and not misplaced_removals(_pod_costs(handed, carried), removing, slack):
            return None
        unwritten = _unwritten(view, carried)
        if not misplaced or not unwritten:
            return None
        if leading:
            self._holding.add(key)
            found = [self._cause((key.namespace, name)) for name in unwritten]
            causes = dict.fromkeys(text for _, text in found)
            reason = HoldReason.strongest(reason for reason, _ in found)
        else:
            causes = {"not on the pods as this replica's pod watch shows them; the leader writes them, and its "
                      "log says why not": None}
            reason = HoldReason.LEADER
        return CostsPending(unwritten=tuple(unwritten), misplaced=tuple(misplaced), causes=tuple(causes),
                            reason=reason)

    def on_pods(self, key: RuntimeKey, view: RuntimeView) -> dict[str, int | None]:
        """The cost each pod of `view` carries (None: none), as the ReplicaSet reads it: the pod watch's
        annotation (whoever leads: every replica's /debug says it; outside `--namespaces` too, where costs an
        earlier release left still order the removals), or without a pod watch (a targets file) what this replica
        wrote while leading; empty where it knows nothing."""
        cluster = self._memory.cluster
        if cluster is None:
            if not self._may_write() or not self._judges(key, view):  # nothing written here, or known
                return {}
            records = self._memory.records
            return {name: record.cost if (record := records.get((key.namespace, name))) is not None else None
                    for name, *_ in view.pods.deletion_costs()}
        namespace, carried = key.namespace, cluster.deletion_cost
        return {name: None if (cost := carried(namespace, name)) is None else carried_cost(cost)
                for name, *_ in view.pods.deletion_costs()}

    def unwritten(self, key: RuntimeKey, view: RuntimeView) -> tuple[str, ...]:
        """The pods of `view` that do not carry its ranking's cost (`autoscaler.ranking_hold`): by the pod watch, or
        what this replica wrote while leading where the watch does not have the pod (`WrittenCosts.carried`); empty
        where nothing can be known (as `misordered`)."""
        if not self._judges(key, view):
            return ()
        leading = self._may_write()
        if not leading and self._memory.cluster is None:
            return ()
        return tuple(_unwritten(view, self._carried_by(key, view, leading)))

    def hurry_turned(self, key: RuntimeKey, view: RuntimeView, removing: int, slack: Callable[[], float]) -> bool:
        """Make the runtime's writes urgent at the next pass when the ReplicaSet, removing `removing` pods by the
        costs on them, would remove a pod `view` ranks above one that stays, and needs more than `slack()` more
        (the load moved onto a pod carrying a low cost); True when it did. Both pods ranked (`turned_removals`): a
        pod whose scrape fails has no need to compare, and the writer leaves its cost as it is. Nothing is held:
        holding a scale-down already served held it back under ordinary noise. Without it the new costs waited
        their per-pod minute, while an HPA without scale-down stabilization may act on the lower value at any sync.
        `slack` (`autoscaler.policies.load_noise`, asked only where the costs are misplaced) keeps noise out: hurrying
        every turn sent two thirds more PATCHes under ordinary noise, each a pod update sent to every pod
        watcher. Only the leader writes, so only it hurries."""
        if not self._judges(key, view) or not self._may_write():
            return False
        carried = self._carried_by(key, view, leading=True)
        if not turned_removals(_pod_costs(view, carried), removing):  # writing would change nothing
            return False
        needs = [PodCosts(pod.name, pod.ready, pod.need if pod.ready and pod.fresh else None, carried[pod.name])
                 for pod in view.pods]
        if not turned_removals(needs, removing, slack()):
            return False
        self._holding.add(key)
        return True

    def _judges(self, key: RuntimeKey, view: RuntimeView) -> bool:
        """Its values known and its pods written here (inside `--namespaces`): else nothing to judge."""
        return view.known and not (self._namespaces and key.namespace not in self._namespaces)

    def _carried_by(self, key: RuntimeKey, view: RuntimeView, leading: bool) -> dict[str, int]:
        """The cost on each pod of `view` as the ReplicaSet reads it (`WrittenCosts.carried`)."""
        return {name: self._memory.carried((key.namespace, name), leading) for name, *_ in view.pods.deletion_costs()}

    def _cause(self, pod: PodId) -> tuple[HoldReason, str]:
        """Why a pod's cost is not on it as this replica has it: in one word for the hold counter, and as the
        log and /debug say it."""
        record = self._memory.records.get(pod)
        if record is not None and record.failures and record.refused is not None:
            if record.refused == 429 or self._throttle.remaining() > 0:
                return HoldReason.THROTTLED, f"throttled by the API server ({record.refused}, Retry-After)"
            if isinstance(record.refused, int):
                return HoldReason.REFUSED, f"refused with {record.refused}"
            return HoldReason.NO_ANSWER, "no answer"
        if self._throttle.remaining() > 0:
            return HoldReason.THROTTLED, "throttled by the API server (Retry-After)"
        if record is not None and record.cost is not None and self._memory.watched(pod):
            if self._foreign.foreign(pod, record) is not None:
                return HoldReason.OVERWRITTEN, f"overwritten by another writer ({self._memory.shown(pod)})"
            if not record.echoed:
                if self._clock() - record.written_at >= ECHO_WAIT_S:
                    return HoldReason.QUEUED, ("written, not shown by the pod watch, which shows none of this "
                                               "replica's writes (behind or stalled)")
                return HoldReason.QUEUED, "written, not yet shown by the pod watch"
        return HoldReason.QUEUED, "queued"
