"""Writes `controller.kubernetes.io/pod-deletion-cost` on runtime pods so that, when the HPA lowers the
replicas, the ReplicaSet removes the least-needed pod first (docs/design.md, "Choosing the pod to remove"). The
costs come from the pure ranking (`autoscaler.policies.ranking`, through `RuntimeView.pods`); when each pod is due
is decided by the pure `autoscaler.actuation.deletion_cost_plan`; this module runs the writer, and its parts are:

- `deletion_cost_memory`: what was written on each pod, and what the pod watch shows of it (its echo);
- `deletion_cost_foreign`: a cost another writer set after this replica's write, written again at most once a minute;
- `deletion_cost_due`: which patches a pass sends (urgent runtimes first, costs already in place left out);
- `deletion_cost_writes`: the PATCHes, paced, with retries, backoff and `Retry-After`;
- `deletion_cost_news`: the lines about failed writes, once per pass and cause;
- `deletion_cost_hold`: what the ranking hold asks (`misordered`, `unwritten`, `on_pods`, `hurry_turned`);
- `deletion_cost_carried`: what `modelmesh_autoscaler_pod_deletion_cost` says, the cost each pod carries.

How (`DeletionCostWriter`): the refresh loop hands each refresh's views, as decided, over through a one-slot
mailbox (`offer`: the newest views replace older ones; it never waits), and the writer's own task plans and
patches. Since the patches land later (or fail), the refresh asks `misordered` before it lets a runtime's
replica count fall (`autoscaler.ranking_hold`); a runtime it held, or whose ranking clearly turned after its value
fell (`hurry_turned`), has its writes made urgent. A pass writes at most `batch_size` pods, urgent ones first, and
stops early when newer views arrive, so a slow API server delays only this task: never a refresh, never an HPA
request. Writes happen only while `may_write()` (leadership) holds; losing it forgets what was written, so a new
term starts by writing every pod once, but for the pods that already carry the cost it would write.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from autoscaler.actuation.cluster_pods import ClusterPods
from autoscaler.actuation.deletion_cost_carried import carried_costs, publish, withdraw
from autoscaler.actuation.deletion_cost_due import DuePatches
from autoscaler.actuation.deletion_cost_foreign import ForeignCosts
from autoscaler.actuation.deletion_cost_hold import HoldAnswers
from autoscaler.actuation.deletion_cost_memory import WrittenCosts
from autoscaler.actuation.deletion_cost_plan import PodId, PodPatch, PodRecord
from autoscaler.actuation.deletion_cost_writes import CostPatches, PodAnnotator
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.ranking_hold import CostsPending
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)


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
        self._metrics = metrics
        self._namespaces = tuple(namespaces)
        self.settings = settings = settings or WriterSettings()
        self._may_write = may_write
        self._clock = clock
        self._latest: Mapping[RuntimeKey, RuntimeView] | None = None
        self._generation = 0
        self._generation_passed = 0  # the newest views a finished pass planned against (`offers_passed`)
        self._wake = asyncio.Event()
        self._held: frozenset[RuntimeKey] = frozenset()  # held or turned at the last refresh: urgent writes
        self._planned_at = -math.inf  # when the last pass planned: retries due by then were looked at
        self._memory = WrittenCosts(cluster, clock)
        foreign = ForeignCosts(self._memory, clock, settings.min_interval_s)
        self._due = DuePatches(self._memory, foreign, metrics, namespaces=namespaces, rand=rand,
                               min_interval_s=settings.min_interval_s, max_interval_s=settings.max_interval_s)
        self._patches = CostPatches(client, metrics, self._memory, foreign, qps=settings.qps,
                                    concurrency=settings.concurrency, backoff_base_s=settings.backoff_base_s,
                                    backoff_cap_s=settings.backoff_cap_s, gone_wait_s=settings.min_interval_s,
                                    refused_wait_s=settings.max_interval_s, clock=clock, rand=rand)
        self._hold = HoldAnswers(self._memory, foreign, self._patches.throttle, namespaces=namespaces,
                                 may_write=may_write, clock=clock)

    @property
    def records(self) -> dict[PodId, PodRecord]:
        """What this replica wrote on each pod while leading (`WrittenCosts.records`)."""
        return self._memory.records

    def offer(self, views: Mapping[RuntimeKey, RuntimeView]) -> None:
        """Put the newest views in the mailbox (replacing any not yet planned) and wake the writer. The refresh
        offers after it has asked `misordered` (or `hurry_turned`) of every runtime: the runtimes it held, and those
        whose ranking clearly turned below what runs, are urgent until next time."""
        self._held = self._hold.take_urgent()
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
        return self._patches.in_flight

    def misordered(self, key: RuntimeKey, view: RuntimeView, removing: int,
                   handed: RuntimeView | None) -> CostsPending | None:
        """What a scale-down waits on (`HoldAnswers.misordered`)."""
        return self._hold.misordered(key, view, removing, handed)

    def on_pods(self, key: RuntimeKey, view: RuntimeView) -> dict[str, int | None]:
        """The cost each pod of `view` carries (`HoldAnswers.on_pods`)."""
        return self._hold.on_pods(key, view)

    def unwritten(self, key: RuntimeKey, view: RuntimeView) -> tuple[str, ...]:
        """The pods of `view` that do not carry its ranking's cost (`HoldAnswers.unwritten`)."""
        return self._hold.unwritten(key, view)

    def hurry_turned(self, key: RuntimeKey, view: RuntimeView, removing: int, slack: Callable[[], float]) -> bool:
        """Make the runtime's writes urgent where its ranking clearly turned (`HoldAnswers.hurry_turned`)."""
        return self._hold.hurry_turned(key, view, removing, slack)

    def forget(self, key: RuntimeKey) -> None:
        """The runtime is gone, or was created again under its name (`autoscaler.forgetting`): a scale-down of it
        is news again, its costs written at once. Kept, the new object's first scale-down, the same as the old
        one's last (3 of 4 replicas), was not urgent and waited for its pods' minute while the ranking hold held
        it. Taken out at the next pass, on the event loop: a pass in progress plans in a thread."""
        self._due.forget(key)

    def wake(self) -> None:
        """Plan again now (leadership changed)."""
        self._wake.set()

    def drop_pending(self) -> None:
        """Leadership is lost: cancel the patches in flight; the pass sends no more (`may_write` is false)."""
        self._patches.cancel()

    async def run(self) -> None:
        """Plan and write whenever views arrive or a retry falls due, until cancelled."""
        while True:
            try:
                async with asyncio.timeout(self._patches.next_retry_in(self._planned_at)):
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
        self._due.start()
        # In a thread: at 50,000 pods planning is 0.2-1 s of Python, which on the event loop held up every
        # HPA request at every refresh. Nothing else adds or takes out records meanwhile: no patch is in flight
        # between passes, and this task is the only one that plans (the pod watch's events only mark echoes,
        # `WrittenCosts`, on the loop). The thread plans and takes out the records
        # of pods gone or created again; their metrics series are removed here, on the loop that renders
        # /metrics.
        failing = self._patches.news.open_pods()  # read on the loop, which the news is kept on
        gone, settled, patches, carried = await asyncio.to_thread(self._plan, views, now, held, failing)
        publish(self._metrics, carried)  # before this pass's writes: each that goes through sets its pod's at once
        self._drop(gone)
        for pod in settled:
            self._patches.news.carried(pod)
        patches = self._due.skip_costs_in_place(patches, now)
        generation = self._generation
        sent = await self._patches.write(patches[: self.settings.batch_size],
                                         lambda: generation == self._generation and self._may_write())
        self._due.cut_off(patches[sent:])  # by the batch or by newer views: still urgent next pass
        self._metrics.deletion_cost_passes.inc()
        return sent

    def _plan(self, views: Mapping[RuntimeKey, RuntimeView], now: float, held: frozenset[RuntimeKey],
              failing: frozenset[PodId]
              ) -> tuple[list[tuple[PodId, PodRecord]], list[PodId], list[PodPatch], dict[PodId, int]]:
        """In the pass's thread: the records taken out, the pods of `failing` found carrying the cost wanted
        (`DuePatches.settle_carried`, before planning: nothing is due for them), the patches due
        (`DuePatches.plan`), and the cost each pod carries now (`deletion_cost_carried`)."""
        settled = self._due.settle_carried(views, failing, now)
        gone, patches = self._due.plan(views, now, held)
        return gone, settled, patches, carried_costs(self._memory, views, self._namespaces)

    def _drop(self, gone: list[tuple[PodId, PodRecord]]) -> None:
        """Forget pods whose records the plan took out: their series and any failure they held open."""
        for pod, record in gone:
            self._patches.remove_series(pod, record)
            self._patches.news.clear(pod)

    def _forget(self) -> None:
        withdraw(self._metrics)
        self._memory.clear()
        self._due.clear()
        self._patches.news.forget()
