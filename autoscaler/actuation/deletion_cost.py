"""Writes `controller.kubernetes.io/pod-deletion-cost` on runtime pods so that, when the HPA lowers the
replicas, the ReplicaSet removes the least-needed pod first (docs/design.md, "Choosing the pod to remove"). The
costs come from the pure ranking (`autoscaler.policies.ranking`, through `RuntimeView.pods`); when each pod is due
is decided by the pure `autoscaler.actuation.deletion_cost_plan`; this module does the writing.

How (`DeletionCostWriter`): the refresh loop hands each refresh's views, as decided, over through a one-slot
mailbox (`offer`: the newest views replace older ones; it never waits), and the writer's own task plans and
patches. Since the patches land later (or fail), the refresh asks `misordered` before it lets a runtime's
replica count fall: a scale-down waits while the ReplicaSet would remove a pod the ranking still needs and a write
that fixes it is still to come (`autoscaler.ranking_hold`); such a runtime's writes are urgent. So are those of
a runtime whose ranking clearly turned after its value fell (`hurry_turned`: the load moved onto a pod the
ReplicaSet would remove, by more than load noise moves it): nothing holds there, and an HPA without scale-down
stabilization acts at its next sync, so the costs must not wait their per-pod minute. A pass
writes at most `batch_size` pods, urgent ones first, with `concurrency` requests in flight and at most `qps` a
second, and stops early when newer views arrive, so a slow API server delays only this task: never a refresh,
never an HPA request. 404 means the pod is gone (normal: it was just removed); 409, 429 and 5xx (and no answer)
are retried with exponential backoff and jitter, honouring `Retry-After`; other refusals (403: missing RBAC)
wait for the 5-minute refresh. A `Retry-After` (API Priority and Fairness throttles the adapter's whole flow,
not one pod) also pauses every other patch of the writer for that long. Writes happen only while `may_write()`
(leadership) holds; losing it forgets what was written, so a new term starts by writing every pod once, but for
the pods that already carry the cost it would write (`cluster.deletion_cost`, the annotation as discovery's pod
watch last saw it): after a failover or a rolling upgrade at 50,000 pods those were a 40-minute backlog of
patches at the qps limit that changed nothing, each a pod update sent to every pod watcher of the cluster. For
the same reason the 5-minute rewrite of an unchanged cost is sent only where the watch shows the pod carrying
something else. A cost another writer set after this replica's write, or removed (the watch shows a value it did
not write, or none, once it has shown the write itself: `_foreign`), counts as not written: the pod is written
again at once where a scale-down waits on it, then at most once its minute while that writer keeps putting its
value back. The ranking hold trusts a write only once the watch shows it (`_carried`): trusting it until the
5-minute check, or the value it wrote over for 10 s as the watch's lag, let a scale-down go with the busiest pod
carrying the lowest cost by hand, or put back by a tool within those 10 s.
What was written is remembered with the pod's uid (`cluster.pod_uid`): a pod deleted and created again under its
name (a controller that reuses names) is a new object without the annotation, and is written at the next pass as
a new pod is, not at the 5-minute rewrite.

The log, at fleet size: failures are said once per pass and cause, not per pod (a Role missing in a namespace
of 500 pods, or an API server failing every tenth patch, was a warning per pod). A cause is the status, and for
refusals (403 RBAC, 422, an admission webhook) also the namespace, as Roles and policies are per namespace. A
cause is a warning when it starts, then debug until every pod it failed has been written, which is one info
line (`... written again`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Final, Protocol

from autoscaler.actuation.cluster_pods import ClusterPods, DeletionCostEvents
from autoscaler.actuation.deletion_cost_plan import (
    PERIODIC,
    PodId,
    PodPatch,
    PodRecord,
    plan_patches,
    scale_down_pending,
)
from autoscaler.actuation.removal_order import PodCosts, carried_cost, misplaced_removals, turned_removals
from autoscaler.kube.backoff import ServerThrottle, retry_delay
from autoscaler.kube.client import KubeApiError
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.policies.ranking import COST_SPACING
from autoscaler.ranking_hold import CostsPending, HoldReason
from autoscaler.selfmetrics import AdapterMetrics, DeletionCostPatchResult

log = logging.getLogger(__name__)

ECHO_WAIT_S: Final = 60.0
"""How long after a write the pod watch, not having shown it yet (its echo), may still show the pod as it was
before: a watch behind, or relisting, which may skip the write's own event. Until then another value on the pod
is that lag, not another writer's; after it, what the watch shows counts, unless the watch of the pod's namespace
has shown none of this replica's writes since (`_watch_behind`: behind, or stalled). The echo is recorded from the
watch's events as they come (`DeletionCostEvents`). No other time window: a tool that puts its value back seconds
after each write was taken for the watch's lag for 10 s, and got past the ranking hold."""

FailureCause = tuple[int | str, str | None]
"""(HTTP status or "no answer", namespace for refusals else None): what one grouped log line is about."""


class PodAnnotator(Protocol):
    """What the writer needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it)."""

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None: ...


@dataclass(frozen=True, slots=True)
class WriterSettings:
    min_interval_s: float = 60.0
    """A changed cost is written at most this often per pod (seconds), except before a scale-down."""
    max_interval_s: float = 300.0
    """Every pod is written at least this often (seconds), changed or not."""
    backoff_base_s: float = 1.0
    """First retry delay after a retryable failure; doubles with each further failure."""
    backoff_cap_s: float = 60.0
    """Longest retry delay: no more than one attempt a minute at a pod the API keeps refusing."""
    qps: float | None = 20.0
    """Patches per second at most, over all pods (None: unlimited); gentle on a shared API server."""
    concurrency: int = 4
    """Patches in flight at once."""
    batch_size: int = 256
    """Patches per pass before newer views are looked at: bounds how long an urgent write can wait."""


def _pod_costs(view: RuntimeView, carried: Mapping[str, int]) -> list[PodCosts]:
    """The pods of `carried` with the costs `view` ranks them at (a pod it does not rank: not ranked)."""
    ranked = {name: (ready, cost if ready and fresh else None)
              for name, ready, fresh, cost in view.pods.deletion_costs()}
    return [PodCosts(name, *ranked.get(name, (True, None)), cost) for name, cost in carried.items()]


def _unwritten(view: RuntimeView, carried: Mapping[str, int]) -> list[str]:
    """The Ready, fresh pods of `view` whose ranked cost is not the one they carry."""
    return [name for name, ready, fresh, cost in view.pods.deletion_costs()
            if ready and fresh and cost is not None and cost != carried[name]]


class DeletionCostWriter:
    """Keeps pod-deletion costs on the pods in step with the ranking; run `run()` as its own task."""

    def __init__(
        self,
        client: PodAnnotator,
        metrics: AdapterMetrics,
        *,
        settings: WriterSettings | None = None,
        may_write: Callable[[], bool] = lambda: True,
        cluster: ClusterPods | None = None,
        namespaces: Collection[str] = (),
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """`cluster`: the pods as discovery's pod watch sees them (their annotation and uid); without it (a
        targets file) every pod is written once per term, and a pod created again under its name at the
        5-minute rewrite. `namespaces`: the only ones written in (empty: all), `--namespaces`; a runtime elsewhere
        (a policy-file entry outside them) is served, but its pods are not written."""
        self._client = client
        self._namespaces = frozenset(namespaces)
        self._cluster = cluster
        self._metrics = metrics
        self.settings = settings or WriterSettings()
        self._may_write = may_write
        self._clock = clock
        self._rand = rand
        self._latest: Mapping[RuntimeKey, RuntimeView] | None = None
        self._generation = 0
        self._generation_passed = 0  # the newest views a finished pass planned against (`offers_passed`)
        self._wake = asyncio.Event()
        self.records: dict[PodId, PodRecord] = {}
        self._scale_downs: dict[RuntimeKey, tuple[int, int]] = {}
        self._forgetting: set[RuntimeKey] = set()  # runtimes gone or created again, forgotten at the next pass
        self._held: frozenset[RuntimeKey] = frozenset()  # held or turned at the last refresh: urgent writes
        self._holding: set[RuntimeKey] = set()  # held or turned so far in the refresh under way
        self._next_slot = 0.0
        # No patch before the server's Retry-After has passed (real time: this is about load, not policy).
        self._throttle = ServerThrottle(self.settings.backoff_cap_s)
        self._planned_at = -math.inf  # when the last pass planned: retries due by then were looked at
        self._failing: dict[FailureCause, set[PodId]] = {}  # causes warned about, with the pods still failing
        self._pass_failures: dict[FailureCause, list[tuple[PodId, DeletionCostPatchResult, float, KubeApiError]]] = {}
        self._in_flight: set[asyncio.Task[None]] = set()
        self._overwritten: set[PodId] = set()  # pods carrying another writer's cost, or fought: said once a spell
        self._foreign_now: set[PodId] = set()  # pods carrying another writer's cost at the last plan
        self._echoes: dict[str, float] = {}  # per namespace, the latest write whose echo the pod watch showed
        self._behind: set[str] = set()  # namespaces whose watch shows none of the writes for ECHO_WAIT_S, said once
        if isinstance(cluster, DeletionCostEvents):
            cluster.on_deletion_cost(self._shown_by_watch)

    def offer(self, views: Mapping[RuntimeKey, RuntimeView]) -> None:
        """Put the newest views in the mailbox (replacing any not yet planned) and wake the writer. The refresh
        offers after it has asked `misordered` (or `hurry_turned`) of every runtime: the runtimes it held, and those
        whose ranking clearly turned below what runs, are urgent until next time."""
        self._held, self._holding = frozenset(self._holding), set()
        self._latest = views
        self._generation += 1
        self._wake.set()

    @property
    def offers(self) -> int:
        """How many times views were offered (`offer`: once a refresh)."""
        return self._generation

    @property
    def offers_passed(self) -> int:
        """The newest offer (counted as `offers` counts) that a finished pass planned against, its PATCHes sent
        and their answers taken in: equal to `offers` once the pass the last refresh woke is over (a pass cut
        off by newer views finishes an older offer). What a caller that acts after the writer's writes (a test
        playing another tool's answer to them) waits for."""
        return self._generation_passed

    @property
    def patches_in_flight(self) -> int:
        """PATCHes sent whose answer the writer has not taken in yet."""
        return len(self._in_flight)

    def misordered(self, key: RuntimeKey, view: RuntimeView, removing: int,
                   handed: RuntimeView | None) -> CostsPending | None:
        """What a scale-down removing `removing` pods waits on (`autoscaler.ranking_hold`), or None: when the pods
        the ReplicaSet would remove by the costs on them are among the least needed by `view`'s ranking; when they
        are among the least needed by `handed`'s ranking (the last refresh that decided the scale-down, across
        refreshes without data: the writer had its turn to write it) (a newer ranking's moves are load
        noise, written at the pod's minute: waiting for them held every scale-down under noise); and when
        nothing can be known (a runtime outside `--namespaces`; a replica not leading, without the pod watch: a
        targets file). The costs on the pods: the pod watch's, or what this replica wrote while leading where the
        watch does not have the pod (`_carried`).

        A replica not leading judges by the pod watch, within one cost bucket: the HPA reads every replica through
        the Service, and a replica that held nothing let a read of it remove the pod the leader's hold kept. Its
        ranking comes from its own scrape, which may put a pod a bucket from where the leader put it, a
        difference the leader never writes away."""
        if not self._judges(key, view):
            return None
        leading = self._may_write()
        cluster = self._cluster
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
        cluster = self._cluster
        if cluster is None:
            if not self._may_write() or not self._judges(key, view):  # nothing written here, or known
                return {}
            return {name: record.cost if (record := self.records.get((key.namespace, name))) is not None else None
                    for name, *_ in view.pods.deletion_costs()}
        namespace, carried = key.namespace, cluster.deletion_cost
        return {name: None if (cost := carried(namespace, name)) is None else carried_cost(cost)
                for name, *_ in view.pods.deletion_costs()}

    def unwritten(self, key: RuntimeKey, view: RuntimeView) -> tuple[str, ...]:
        """The pods of `view` that do not carry its ranking's cost (`autoscaler.ranking_hold`): by the pod watch, or
        what this replica wrote while leading where the watch does not have the pod (`_carried`); empty where
        nothing can be known (as `misordered`)."""
        if not self._judges(key, view):
            return ()
        leading = self._may_write()
        if not leading and self._cluster is None:
            return ()
        return tuple(_unwritten(view, self._carried_by(key, view, leading)))

    def hurry_turned(self, key: RuntimeKey, view: RuntimeView, removing: int, slack: Callable[[], float]) -> bool:
        """Make the runtime's writes urgent at the next pass when the ReplicaSet, removing `removing` pods by the
        costs on them, would remove a pod `view` ranks above one that stays, and needs more than `slack()` more
        (the load moved onto a pod carrying a low cost); True when it did. Both pods ranked (`turned_removals`): a
        pod whose scrape fails has no need to compare, and the writer leaves its cost as it is. Nothing is held:
        holding a scale-down already served held it back under ordinary noise. Without it the new costs waited
        their per-pod minute, while an HPA without scale-down stabilization may act on the lower value at any sync.
        `slack`
        (`autoscaler.policies.load_noise`, asked only where the costs are misplaced) keeps noise out: hurrying
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
        """The cost on each pod of `view` as the ReplicaSet reads it (`_carried`)."""
        return {name: self._carried((key.namespace, name), leading) for name, *_ in view.pods.deletion_costs()}

    def _carried(self, pod: PodId, leading: bool) -> int:
        """The cost on the pod as the ReplicaSet reads it: what the pod watch shows (a pod it watches without the
        annotation: 0), else, on the leader, what it wrote (a pod not watched yet, or no pod watch). The leader
        does not take its own write for in place before the watch shows it: the value the watch shows meanwhile
        may be the watch's lag or another writer's put back at once, and trusting the write (for 5 minutes, then
        for 10 s) let a scale-down go with the busiest pod carrying the lowest cost."""
        record = self.records.get(pod) if leading else None
        if record is not None and record.cost is not None:
            if not self._watched(pod):
                return record.cost
            shown = self._cluster.deletion_cost(*pod) if self._cluster is not None else None
            cost = carried_cost(shown)
            if cost == record.cost and shown is not None:
                record.echoed = True  # (not the namespace's watch: the pod may have shown it before the write)
            return cost
        return carried_cost(self._cluster.deletion_cost(*pod) if self._cluster is not None else None)

    def _watched(self, pod: PodId) -> bool:
        """Whether the pod watch has the pod (then a missing annotation is one removed, which the ReplicaSet reads
        as 0, not one not known)."""
        return self._cluster is not None and self._cluster.pod_uid(*pod) is not None

    def _foreign(self, pod: PodId, record: PodRecord) -> int | None:
        """The cost another writer put on the pod after this replica wrote `record.cost` (a `kubectl annotate`,
        another tool; none, read as 0, where it removed the annotation), as the pod watch shows it; None where
        it shows this replica's write, or the pod is not watched (a pod just created, or no pod watch). Until the
        watch has shown the write itself (`PodRecord.echoed`), for `ECHO_WAIT_S`, another value is the pod as it
        was before the write, the watch behind or relisting: no time window after the write, which a tool that
        puts its value back within it got through. The value of a PATCH that got no answer is this replica's own
        (`PodRecord.unanswered`): an API server slow to commit lands it after the client gave up, and it was said
        as another writer's, sending the user after a tool that was not there."""
        if record.cost is None or not self._watched(pod):
            return None
        shown = self._cluster.deletion_cost(*pod) if self._cluster is not None else None
        cost = carried_cost(shown)
        if cost == record.cost:
            if shown is not None:
                record.echoed = True  # (not the namespace's watch: the pod may have shown it before the write)
            return None
        if not record.echoed and (self._clock() - record.written_at < ECHO_WAIT_S or self._watch_behind(pod, record)):
            return None
        if shown in {str(sent) for sent in record.unanswered}:
            return None  # a PATCH of this replica's that got no answer, committed after all
        return cost

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
            self._echoed(pod, record)

    def _echoed(self, pod: PodId, record: PodRecord) -> None:
        """The pod watch's event has shown `record.cost` since it was written: a different value is another
        writer's from now on; and the watch of the pod's namespace works up to that write (`_watch_behind`). Only
        an event says the latter: a pass that finds the value on the pod may find what it carried before the
        write (a ranking turned back, a no-op PATCH that sends no event), and took a stalled watch for working."""
        if record.echoed:
            return
        record.echoed = True
        namespace = pod[0]
        if record.written_at > self._echoes.get(namespace, -math.inf):
            self._echoes[namespace] = record.written_at
        self._behind.discard(namespace)

    def _watch_behind(self, pod: PodId, record: PodRecord) -> bool:
        """Whether the pod watch has shown none of this replica's writes in the pod's namespace since `record`
        was written: behind, or connected but stalled. Another value it shows is then the pod as it was, not
        another writer's: a watch that delivered nothing made every write another writer's after `ECHO_WAIT_S`
        (300 pods: 270 PATCHes a minute, lines naming them all, the hold said `overwritten`)."""
        return self._echoes.get(pod[0], -math.inf) < record.written_at

    def _cause(self, pod: PodId) -> tuple[HoldReason, str]:
        """Why a pod's cost is not on it as this replica has it: in one word for the hold counter, and as the
        log and /debug say it."""
        record = self.records.get(pod)
        if record is not None and record.failures and record.refused is not None:
            if record.refused == 429 or self._throttle.remaining() > 0:
                return HoldReason.THROTTLED, f"throttled by the API server ({record.refused}, Retry-After)"
            if isinstance(record.refused, int):
                return HoldReason.REFUSED, f"refused with {record.refused}"
            return HoldReason.NO_ANSWER, "no answer"
        if self._throttle.remaining() > 0:
            return HoldReason.THROTTLED, "throttled by the API server (Retry-After)"
        if record is not None and record.cost is not None and self._watched(pod):
            if self._foreign(pod, record) is not None:
                return HoldReason.OVERWRITTEN, f"overwritten by another writer ({self._shown(pod)})"
            if not record.echoed:
                if self._clock() - record.written_at >= ECHO_WAIT_S:
                    return HoldReason.QUEUED, ("written, not shown by the pod watch, which shows none of this "
                                               "replica's writes (behind or stalled)")
                return HoldReason.QUEUED, "written, not yet shown by the pod watch"
        return HoldReason.QUEUED, "queued"

    def _shown(self, pod: PodId) -> str:
        """The annotation on the pod as the pod watch shows it, as it is written there (`none`: removed)."""
        shown = self._cluster.deletion_cost(*pod) if self._cluster is not None else None
        return "none" if shown is None else shown

    def forget(self, key: RuntimeKey) -> None:
        """The runtime is gone, or was created again under its name (`autoscaler.forgetting`): a scale-down of it
        is news again, its costs written at once. Kept, the new object's first scale-down, the same as the old
        one's last (3 of 4 replicas), was not urgent and waited for its pods' minute while the ranking hold held
        it. Taken out at the next pass, on the event loop: a pass in progress plans in a thread."""
        self._forgetting.add(key)

    def wake(self) -> None:
        """Plan again now (leadership changed)."""
        self._wake.set()

    def drop_pending(self) -> None:
        """Leadership is lost: cancel the patches in flight; the pass sends no more (`may_write` is false)."""
        for task in list(self._in_flight):
            task.cancel()

    async def run(self) -> None:
        """Plan and write whenever views arrive or a retry falls due, until cancelled."""
        while True:
            try:
                async with asyncio.timeout(self._next_retry_in()):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.sync()
            except Exception:
                log.exception("deletion-cost pass failed; trying again at the next refresh")

    async def sync(self) -> int:
        """Plan against the newest views and write what is due now; returns the number of patches sent. Counted
        in `offers_passed` however it ends, and in `modelmesh_autoscaler_deletion_cost_passes_total` where it
        planned (leading) and finished without a bug."""
        planned = self._generation  # the views this pass plans against, read as it starts
        try:
            return await self._pass()
        finally:
            self._generation_passed = max(self._generation_passed, planned)

    async def _pass(self) -> int:
        views = self._latest
        if views is None:
            return 0
        if not self._may_write():
            self._forget()
            return 0
        now = self._planned_at = self._clock()
        held = self._held
        forgetting, self._forgetting = self._forgetting, set()
        for key in forgetting:
            self._scale_downs.pop(key, None)
        # In a thread: at 50,000 pods planning is 0.2-1 s of Python, which on the event loop held up every
        # HPA request at every refresh. Nothing else adds or takes out records meanwhile: no patch is in flight
        # between passes, and this task is the only one that plans (the pod watch's events only mark echoes,
        # `_shown_by_watch`, on the loop). The thread plans and takes out the records
        # of pods gone or created again; their metrics series are removed here, on the loop that renders
        # /metrics.
        gone, patches = await asyncio.to_thread(self._plan, views, now, held)
        self._drop(gone)
        patches = self._skip_costs_in_place(patches, now)
        sent = await self._write(patches[: self.settings.batch_size], self._generation)
        for patch in patches[sent:]:
            if patch.priority == 0:  # cut off by the batch or by newer views: still urgent next pass
                self._scale_downs.pop(patch.runtime, None)
        self._metrics.deletion_cost_passes.inc()
        return sent

    def _plan(self, views: Mapping[RuntimeKey, RuntimeView], now: float,
              held: frozenset[RuntimeKey]) -> tuple[list[tuple[PodId, PodRecord]], list[PodPatch]]:
        """(the records taken out: pods no longer in the views, or created again; the patches due): all the
        per-pod work of a pass, for a thread. `held`: runtimes whose scale-down waits for their costs, written
        at once (not after the per-pod minute) so that it waits one refresh."""
        if self._namespaces:
            views = {key: view for key, view in views.items() if key.namespace in self._namespaces}
        present = {(key.namespace, name) for key, view in views.items() for name, *_ in view.pods.deletion_costs()}
        gone = [(pod, self.records.pop(pod)) for pod in [pod for pod in self.records if pod not in present]]
        recreated = self._recreated()
        gone += [(pod, self.records.pop(pod)) for pod in recreated]
        if recreated:
            log.info("deletion costs: %d pods were deleted and created again under their names (a new uid, "
                     "without the annotation written on the old one); writing them as new pods: %s",
                     len(recreated), few([f"{ns}/{name}" for ns, name in recreated]))
        return gone, plan_patches(views, self._as_on_pods(now), self._urgent(views) | held, now,
                                      min_interval_s=self.settings.min_interval_s,
                                      max_interval_s=self.settings.max_interval_s)

    def _as_on_pods(self, now: float) -> Mapping[PodId, PodRecord]:
        """The records to plan by, with the cost another writer set on a pod in place of this replica's
        (`_foreign`): such a pod is written again as a changed cost is (at once where a scale-down waits on it,
        else at the pod's minute), not only at its 5-minute check; once written again for another writer's value
        (`PodRecord.fought`), at most once its minute even where its runtime's writes are hurried: a tool that
        puts its value back after each write was written at every refresh. Said once a spell, at INFO, with the
        annotation as it is on the pod."""
        wait = self.settings.min_interval_s
        overwritten: dict[PodId, PodRecord] = {}
        behind: list[PodId] = []
        for pod, record in self.records.items():
            cost = self._foreign(pod, record)
            if cost is None and self._unshown(pod, record, now):
                behind.append(pod)
            if cost is not None:
                retry_at = max(record.retry_at, record.written_at + wait) if record.fought else record.retry_at
                overwritten[pod] = replace(record, cost=cost, retry_at=retry_at)
            elif record.fought and record.echoed and now - record.written_at >= wait:
                record.fought = False  # its write stayed a minute: that writer stopped
        self._foreign_now = set(overwritten)
        self._say_behind(behind)
        news = [pod for pod in overwritten if pod not in self._overwritten]
        self._overwritten = self._foreign_now | {pod for pod, record in self.records.items() if record.fought}
        if news:
            log.info("deletion costs: %d pods carry a cost another writer set after this replica's, or removed "
                     "(kubectl annotate, another tool), which the ReplicaSet removes by; writing them again, then "
                     "at most once a minute while it puts its own back: %s",
                     len(news), few([f"{ns}/{name} ({self._shown((ns, name))})" for ns, name in news]))
        return ChainMap(overwritten, self.records) if overwritten else self.records

    def _unshown(self, pod: PodId, record: PodRecord, now: float) -> bool:
        """Whether the pod watch, behind or stalled, shows the pod as it was before a write of `ECHO_WAIT_S` ago."""
        return (record.cost is not None and not record.echoed and now - record.written_at >= ECHO_WAIT_S
                and self._watched(pod) and self._watch_behind(pod, record)
                and carried_cost(self._cluster.deletion_cost(*pod) if self._cluster is not None else None)
                != record.cost)

    def _say_behind(self, pods: list[PodId]) -> None:
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

    def _recreated(self) -> list[PodId]:
        """The pods written whose name the pod watch now shows on another object (another uid)."""
        if self._cluster is None:
            return []
        uid_of = self._cluster.pod_uid
        return [pod for pod, record in self.records.items()
                if record.uid is not None and (uid := uid_of(*pod)) is not None and uid != record.uid]

    def _uid(self, pod: PodId) -> str | None:
        return self._cluster.pod_uid(*pod) if self._cluster is not None else None

    def _skip_costs_in_place(self, patches: list[PodPatch], now: float) -> list[PodPatch]:
        """The patches without those whose cost the pod already carries, as discovery's pod watch last saw it.

        A first write whose cost is in place (a previous leader wrote it) counts as written at a random moment
        of the last `max_interval_s`, so that the periodic checks of a new term spread out instead of all
        falling due together. A periodic rewrite whose cost is in place counts as done now: the watch shows
        the pod as the cluster has it, so the rewrite would repair nothing (a hand edit or a lost write shows
        there as another value, and is written). At 10,000 pods those rewrites alone were 33 patches a second,
        over the writer's qps, each a pod update sent to every pod watcher of the cluster."""
        if self._cluster is None:
            return patches
        kept: list[PodPatch] = []
        adopted = checked = 0
        for patch in patches:
            pod = (patch.namespace, patch.pod)
            first = pod not in self.records
            if not (first or patch.priority == PERIODIC) or self._cluster.deletion_cost(*pod) != str(patch.cost):
                kept.append(patch)
                continue
            if first:
                self.records[pod] = PodRecord(cost=patch.cost, uid=self._uid(pod), echoed=True,
                                              written_at=now - self._rand() * self.settings.max_interval_s)
                self._metrics.pod_deletion_cost.labels(*pod).set(patch.cost)
                adopted += 1
            else:
                record = self.records[pod]
                record.written_at, record.uid, record.echoed = now, self._uid(pod), True
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

    async def _write(self, patches: list[PodPatch], generation: int) -> int:
        slots = asyncio.Semaphore(self.settings.concurrency)
        tasks: list[asyncio.Task[None]] = []

        async def one(patch: PodPatch) -> None:
            try:
                await self._patch(patch)
            finally:
                slots.release()

        for patch in patches:
            await slots.acquire()
            await self._pace()
            # Checked after every wait, just before sending: leadership may have ended meanwhile.
            if generation != self._generation or not self._may_write():
                slots.release()
                break
            task = asyncio.create_task(one(patch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            tasks.append(task)
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        self._report_failures()
        for outcome in outcomes:
            if isinstance(outcome, Exception):  # a bug; a cancelled patch (leadership lost) is simply dropped
                raise outcome
        return len(tasks)

    async def _pace(self) -> None:
        """At most `qps` patches a second, spread evenly, and none while the server's Retry-After lasts (real
        time: this is about load, not policy)."""
        while (throttled := self._throttle.remaining()) > 0:  # a 429 may arrive while we wait
            await asyncio.sleep(throttled)
        if self.settings.qps is None:
            return
        now = time.monotonic()
        wait = self._next_slot - now
        self._next_slot = max(now, self._next_slot) + 1.0 / self.settings.qps
        if wait > 0:
            await asyncio.sleep(wait)

    async def _patch(self, patch: PodPatch) -> None:
        pod = (patch.namespace, patch.pod)
        record = self.records.setdefault(pod, PodRecord())
        uid = self._uid(pod)  # read before sending: a pod created again meanwhile is written again next pass
        fought = pod in self._foreign_now  # written again for another writer's value: at its minute from now on
        record.sending, record.sent_echoed = patch.cost, False  # its echo may come before the answer
        try:
            await self._client.patch_pod_annotations(
                patch.namespace, patch.pod, {DELETION_COST_ANNOTATION: str(patch.cost)}
            )
        except KubeApiError as error:
            record.sending = None
            if error.status is None and patch.cost not in record.unanswered:
                record.unanswered += (patch.cost,)
            self._failed(pod, record, error)
            return
        record.cost, record.written_at, record.uid, record.echoed = patch.cost, self._clock(), uid, False
        record.sending, record.unanswered = None, ()
        if record.sent_echoed:
            self._echoed(pod, record)
        record.fought = record.fought or fought
        record.failures, record.retry_at, record.refused = 0, -math.inf, None
        self._clear_failure(pod)
        self._metrics.deletion_cost_patched("ok")
        self._metrics.pod_deletion_cost.labels(*pod).set(patch.cost)

    def _failed(self, pod: PodId, record: PodRecord, error: KubeApiError) -> None:
        now = self._clock()
        if error.status == 404:
            log.debug("pod %s/%s is gone; no deletion cost to write", *pod)
            self._metrics.deletion_cost_patched("not_found")
            self._remove_series(pod, record)
            self.records[pod] = PodRecord(retry_at=now + self.settings.min_interval_s)
            self._clear_failure(pod)  # nothing left to write
            return
        record.failures += 1
        record.refused = status = error.status if error.status is not None else "no answer"
        self._throttle.note(error)
        result: DeletionCostPatchResult
        if error.retryable:
            record.retry_at = now + retry_delay(record.failures, self.settings.backoff_base_s,
                                                self.settings.backoff_cap_s, self._rand(), error.retry_after_s)
            result = "retried"
        else:
            record.retry_at = now + self.settings.max_interval_s
            result = "failed"
        self._metrics.deletion_cost_patched(result)
        self._metrics.deletion_cost_patch_errors.labels(str(error.status) if error.status is not None else "none").inc()
        cause = (status, None if error.retryable else pod[0])
        self._pass_failures.setdefault(cause, []).append((pod, result, record.retry_at - now, error))

    def _clear_failure(self, pod: PodId) -> None:
        """`pod` no longer holds a failure open (written, gone or forgotten): a cause whose pods are all cleared
        is said to be over (`_report_failures`)."""
        for pods in self._failing.values():
            pods.discard(pod)

    def _report_failures(self) -> None:
        """One line per cause for the pass just done; one when a cause's pods are all written again."""
        failures, self._pass_failures = self._pass_failures, {}
        for cause, failed in failures.items():
            pods = {pod for pod, *_ in failed}
            for other in self._failing.values():  # a pod fails for one cause at a time
                other -= pods
            level = logging.DEBUG if cause in self._failing else logging.WARNING
            self._failing.setdefault(cause, set()).update(pods)
            status, namespace = cause
            (_, result, _, example), waits = failed[0], [wait for *_, wait, _ in failed]
            how = "retried with backoff" if result == "retried" else "refused; tried again at the 5-minute refresh"
            where = f" in namespace {namespace}" if namespace is not None else ""
            soonest, latest = round(min(waits)), round(max(waits))
            wait = f"{soonest} s" if soonest == latest else f"{soonest}-{latest} s"
            log.log(level, "deletion costs of %d pods%s not written (%s, %s; next try in %s): %s; e.g. %s",
                    len(failed), where, status, how, wait, few([f"{ns}/{name}" for (ns, name), *_ in failed]),
                    example)
        for cause in [cause for cause, pods in self._failing.items() if not pods]:
            del self._failing[cause]
            status, namespace = cause
            log.info("deletion costs are written again%s: every pod that failed with %s is written",
                     f" in namespace {namespace}" if namespace is not None else "", status)

    def _next_retry_in(self) -> float | None:
        """Until the next retry the last pass did not look at. One due by then was written, cut off (newer views
        or the batch: the next views plan it) or is no longer wanted (the pod went not Ready or stale): planning
        again before new views arrive would only spin on the event loop that serves the HPA."""
        due = [r.retry_at for r in self.records.values() if r.failures and r.retry_at > self._planned_at]
        return max(0.0, min(due) - self._clock()) if due else None

    def _drop(self, gone: list[tuple[PodId, PodRecord]]) -> None:
        """Forget pods whose records `_plan` took out: their series and any failure they held open."""
        for pod, record in gone:
            self._remove_series(pod, record)
            self._clear_failure(pod)

    def _forget(self) -> None:
        for pod, record in self.records.items():
            self._remove_series(pod, record)
        self.records.clear()
        self._scale_downs.clear()
        self._forgetting.clear()
        self._failing.clear()
        self._echoes.clear()  # a term leading again says a stalled watch again
        self._behind.clear()

    def _remove_series(self, pod: PodId, record: PodRecord) -> None:
        if record.cost is not None:
            with contextlib.suppress(KeyError):  # already gone: nothing to remove
                self._metrics.pod_deletion_cost.remove(*pod)
