"""The refresh loop: read every runtime from the source, decide, and publish the views the API serves.

Handlers only read `Refresher.views`; an HPA request never waits on a scrape or on Prometheus. Decisions are
pure functions (`autoscaler.policies.decision.decide`) of the snapshot, the policy and the memory of the previous
refresh; this module only schedules them and keeps that memory. A runtime it has no memory of (the adapter just
started, or the runtime is new) warms up first (`autoscaler.policies.warmup`): a restart never lowers what runs.

Each refresh reads two times (`autoscaler.running_clock`): the wall clock, which sources and freshness use
(samples carry Unix times), and the running clock, which the memory's decay and the warm-up grace count on, so
that neither a step of the wall clock nor a stopped adapter lowers a value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Protocol

from autoscaler.capacity_warnings import NoCapacityWarnings
from autoscaler.costs_left_outside import CostsLeftOutside
from autoscaler.forgetting import ForgetsRuntimes, RecreatedRuntimes
from autoscaler.horizon_log import ShortHorizonLog
from autoscaler.log_lists import say_each_or_counted
from autoscaler.model import RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.policies.slow_fall import slow_fall
from autoscaler.policies.warmup import WarmUp, decide_remembering
from autoscaler.ranking_hold import RankingWrites
from autoscaler.running_clock import RunningClock, SourceWait
from autoscaler.scale_down_hold import RankingHold
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import MetricSource
from autoscaler.transition_log import RuntimeTransitions
from autoscaler.unwritten_costs import warned, without_costs

log = logging.getLogger(__name__)


class ScaleAsks(Protocol):
    """What the HPA last asked of each runtime's RuntimeScale (`autoscaler.actuation.scale_asks`)."""

    def replicas_for(self, key: RuntimeKey) -> int | None: ...

    def settled_for(self, key: RuntimeKey) -> bool:
        """False until the RuntimeScales of the runtime's namespace are listed: `replicas_for` may say None then
        for a RuntimeScale not seen yet."""
        ...

    async def wait_settled(self, timeout_s: float) -> bool:
        """Wait, at most `timeout_s`, until every namespace's RuntimeScales are listed; whether they are."""
        ...


FIRST_LIST_WAIT_S = 5.0
"""How long the first refresh waits for the bridge's RuntimeScales to be listed (a round trip; the Kubernetes
client's own timeout, where no leader election shortens it): so that runtimes warm up from what the HPA last
asked at once, not after a refresh of 503s. A list slower than that holds only the runtimes it covers, each for
at most its warm-up grace (`autoscaler.policies.warmup`)."""


RefreshListener = Callable[[dict[RuntimeKey, RuntimeView]], Awaitable[None]]
HpaBounds = Callable[[RuntimeKey], tuple[int | None, int | None]]
"""(minReplicas, maxReplicas) of the HPA that scales a runtime, (None, None) when none does."""
HpaWarnings = Callable[[Collection[RuntimeKey]], Mapping[RuntimeKey, tuple[str, ...]]]
"""The /debug warnings of the runtimes given (the refresh's) that the HPAs' selectors get wrong."""


@dataclasses.dataclass(slots=True)
class _RefreshPass:
    """What one refresh gathers runtime by runtime (`Refresher._decide_runtime`) for the steps after the loop."""

    now: float  # the wall clock, which freshness is judged on
    running: float  # the running clock, which values decay on (`autoscaler.running_clock`)
    writes: RankingWrites | None  # the deletion-cost writer, as at the refresh's start
    views: dict[RuntimeKey, RuntimeView] = dataclasses.field(default_factory=dict)
    failed: set[RuntimeKey] = dataclasses.field(default_factory=set)  # runtimes whose decision raised
    # What the writer sees: the views as decided, with the scale-downs a ranking hold keeps from the HPA.
    decided: dict[RuntimeKey, RuntimeView] = dataclasses.field(default_factory=dict)
    # Runtimes seeded after the grace period without their RuntimeScale's list (`_say_seeded_unasked`).
    unasked: list[RuntimeKey] = dataclasses.field(default_factory=list)
    no_capacity: NoCapacityWarnings = dataclasses.field(default_factory=NoCapacityWarnings)
    # Runtimes whose Deployment was created again since the last refresh, with the uid the old one had.
    recreated: dict[RuntimeKey, str] = dataclasses.field(default_factory=dict)


class Refresher:
    """Runs the refresh loop (`run`) and keeps what lasts between refreshes: each runtime's memory or warm-up,
    its Deployment's uid, and the views the API serves (`views`). Set after construction, where the process has
    them: the HPAs' bounds, the RuntimeScales' asks, the deletion-cost writer, the discovery health."""

    def __init__(
        self,
        source: MetricSource,
        policies: PolicyBook,
        metrics: AdapterMetrics,
        *,
        interval_s: float = 15.0,
        window_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        source_wait: SourceWait | None = None,
    ) -> None:
        """`clock`: the wall clock; `monotonic`: the clock that only moves forward, by the time that passes.
        Both injectable, so that tests can step the one without the other. `source_wait`: how the source's waits
        are named and bounded in the line of a late refresh (`autoscaler.running_clock`); by its name where None."""
        self.source = source
        self.policies = policies
        self.metrics = metrics
        self.interval_s = interval_s
        self.window_s = window_s
        self.source_wait = source_wait or SourceWait(source.name)
        self._clock = RunningClock(interval_s, clock, monotonic, self.source_wait)
        self._memory: dict[RuntimeKey, RuntimeMemory] = {}
        self._warming: dict[RuntimeKey, WarmUp] = {}  # runtimes with no memory yet (autoscaler.policies.warmup)
        self._recreated = RecreatedRuntimes()  # each runtime's Deployment uid, where discovery reads it
        self._listed: set[RuntimeKey] = set()  # the runtimes the last refresh read: those missing now are gone
        self._failing: set[RuntimeKey] = set()  # runtimes whose last decision raised (logged once)
        self._transitions = RuntimeTransitions()  # kept: it remembers what each runtime's last line said was missing
        self._short_horizons = ShortHorizonLog()  # kept: it remembers each runtime's short-horizon warning said
        self.views: dict[RuntimeKey, RuntimeView] = {}
        self.refreshes = 0
        self.refreshed_monotonic: float | None = None
        """`time.monotonic()` at the end of the last refresh that completed (None before the first)."""
        self.listeners: list[RefreshListener] = []
        self._reported_errors: dict[str, int] = {}
        self._reported_reads = 0
        self._reported_partial = 0
        self.hpa_bounds: HpaBounds | None = None
        """Set in cluster mode: the HPAs' bounds fill in what the config leaves unset (docs/design.md, Bounds)."""
        self.hpa_warnings: HpaWarnings | None = None
        """Set in cluster mode: what the HPAs' selectors get wrong for a runtime (`sources.hpa_selections`), added
        to its view's `warnings` (its /debug) at every refresh."""
        self.scale_asks: ScaleAsks | None = None
        """Set while the RuntimeScale bridge runs: what the HPA last asked for, part of what runs (warm-up)."""
        self.configured_warnings: Mapping[RuntimeKey, str] = {}
        """Set at start: what the settings leave a runtime without (a policy-file runtime outside --namespaces,
        `autoscaler.runtimes_outside_namespaces`), added to its view's `warnings` (its /debug) at every refresh."""
        self.costs_left_outside: CostsLeftOutside | None = None
        """Set where deletion costs are written and discovery watches pods: the `configured_warnings` runtimes
        (outside --namespaces) get none, so /debug shows none, and the costs left on their pods are warned of."""
        self.costs_written = True
        """False under `--deletion-cost off`: no pod-deletion cost is written, so the views published show none
        (`autoscaler.unwritten_costs`), only each pod's `need`."""
        self.costs_unwritten: str | None = None
        """Set where deletion costs are asked for but nothing can write them (`--targets` without `--kubeconfig`
        outside a cluster): added to every runtime's /debug `warnings`, beside the costs it shows."""
        self.cost_writes: RankingWrites | None = None
        """Set while deletion costs are written: handed each refresh's views as decided, and asked whether a
        runtime's ranking is on its pods before its replica count may fall (`autoscaler.ranking_hold`)."""
        self._ranking_hold = RankingHold(counted=lambda reason: metrics.scale_down_holds.labels(reason).inc())
        self.discovery_health: Callable[[], Mapping[str, bool]] | None = None
        """Set where discovery watches the cluster (`DiscoveryScopes.scope_health`): published with each
        refresh's other self-metrics, so that the refresh process's /metrics says it as of that refresh."""

    @property
    def ready(self) -> bool:
        """True once a first refresh has completed, whatever it found."""
        return self.refreshes > 0

    async def refresh_once(self) -> None:
        """One refresh: read every runtime, decide each (`_decide_runtime`), say what changed, forget the runtimes
        gone, publish the views, and hand them to the listeners (a failing listener is logged, the rest run)."""
        started = time.perf_counter()
        reading = self._clock.read()
        asked = self._clock.monotonic()
        snapshots = await self.source.collect(reading.wall)
        self._clock.waited_on_source(asked)
        done = _RefreshPass(reading.wall, reading.running, self.cost_writes,
                            recreated=self._recreated.created_again((s.key, s.uid) for s in snapshots))
        for snapshot in snapshots:
            self._decide_runtime(snapshot, done)
        self._flush_logs(done)
        views = done.views
        for key, warning in self.configured_warnings.items():  # a few runtimes at most, not one per runtime
            if (warned_view := views.get(key)) is not None:
                warned_view = warned(warned_view, warning)
                views[key] = warned_view if self.costs_left_outside is None else self.costs_left_outside.shown(
                    warned_view)
        if self.hpa_warnings is not None:  # rare: an HPA selecting another runtime, two HPAs selecting one
            for key, said in self.hpa_warnings(views).items():
                for warning in said:
                    views[key] = warned(views[key], warning)
        if not self.costs_written:
            views = {key: without_costs(view) for key, view in views.items()}
        elif self.costs_unwritten is not None:
            views = {key: warned(view, self.costs_unwritten) for key, view in views.items()}
        self._forget_gone(snapshots, done.failed)
        self.policies.notice_file_change()  # an edited policy file: a restart applies it (logged once)
        self._publish(views, done)
        self.metrics.refresh_seconds.observe(time.perf_counter() - started)
        for listener in self.listeners:
            try:
                await listener(views)
            except Exception:
                log.exception("refresh listener failed; metrics serving is unaffected")

    def _decide_runtime(self, snapshot: RuntimeSnapshot, done: _RefreshPass) -> None:
        """Decide one runtime of the refresh `done` gathers: its view into `done.views` (or its key into
        `done.failed`), its memory or warm-up kept, and its view noted for the refresh's log lines."""
        key = snapshot.key
        if (was := done.recreated.get(key)) is not None:  # forgotten before anything reads its memory: its
            self._forget_recreated(key, snapshot.uid, was)  # policy annotations' too
        policy = self.policies.policy_for(key, snapshot.annotations)
        if self.hpa_bounds is not None:
            policy = self.policies.with_hpa_bounds(key, policy, *self.hpa_bounds(key))
        before = None if was is not None else self.views.get(key)  # the view served of the old object is not its own
        memory = self._memory.get(key)
        # What the HPA last asked for counts only for a runtime without memory (`warmup.replica_floor`).
        asks = None if memory is not None else self.scale_asks
        ask_unread = asks is not None and not asks.settled_for(key)
        scaled = None if asks is None or ask_unread else asks.replicas_for(key)
        warming = self._warming.get(key)
        warned_before = _warned_no_capacity(memory, warming)
        try:
            view, memory, warm = decide_remembering(
                snapshot, policy, memory, warming, done.now, self.window_s, scaled, done.running, ask_unread)
        except Exception:
            self._decision_failed(key)
            done.failed.add(key)
            return
        if ask_unread and memory is not None:
            done.unasked.append(key)
        if done.writes is not None:
            done.decided[key] = view
            view = self._ranking_hold.hold(view, before, done.running, done.writes, policy)
            # In place, on this refresh's view (its dict made with it): a `dataclasses.replace` cost 7 µs a runtime,
            # 35 ms a refresh at 5,000 runtimes, for a field only /debug reads.
            view.costs_on_pods.update(done.writes.on_pods(key, view))
        if memory is not None:  # a value in the middle of a slow fall says so in /debug (rare; one check else)
            view = slow_fall(view, memory.smoothed.get(ServedMetric.DESIRED_REPLICAS), policy.scale_down_tau_s,
                             done.running)
        done.views[key] = view
        if memory is not None:
            self._memory[key] = memory
        elif warm is None:  # scaled to zero: when it has pods again it warms up afresh
            self._memory.pop(key, None)
        if warm is None:
            self._warming.pop(key, None)
        else:
            self._warming[key] = warm
        self._transitions.note(before, view)
        done.no_capacity.note(view, warned_before, _warned_no_capacity(memory, warm))
        horizons_said = self._short_horizons.said
        if view.warnings or (horizons_said and key in horizons_said):  # rare: only those warned
            self._short_horizons.note(view)

    def _flush_logs(self, done: _RefreshPass) -> None:
        """Say what the refresh's runtimes changed, a line for each kind of news (or one for many runtimes)."""
        self._transitions.flush()
        done.no_capacity.flush()
        _say_seeded_unasked(done.unasked)
        if done.writes is not None:
            self._ranking_hold.flush()
        self._short_horizons.flush()

    def _forget_gone(self, snapshots: Sequence[RuntimeSnapshot], failed: set[RuntimeKey]) -> None:
        """Forget the runtimes the source no longer lists, from every memory (`runtime_memories`). A runtime whose
        decision failed is listed, and keeps its memory for when it decides again; one decided again (or gone)
        is logged again should it fail later."""
        listed = {snapshot.key for snapshot in snapshots}
        for gone in self._listed - listed:
            self._forget_runtime(gone)
        self._listed = listed
        self.policies.warn_unmatched(listed)
        self._failing &= failed

    def runtime_memories(self) -> tuple[ForgetsRuntimes, ...]:
        """Everything that keeps something per runtime from one refresh to the next, besides the refresher's own
        memory and warm-up: the one list a runtime gone or created again is forgotten from. Whatever comes to
        keep something per runtime belongs here, or a runtime created within one refresh inherits it."""
        kept: tuple[ForgetsRuntimes, ...] = (self.policies, self._ranking_hold, self._transitions,
                                             self._short_horizons)
        if self.costs_left_outside is not None:
            kept = (*kept, self.costs_left_outside)
        return kept if self.cost_writes is None else (*kept, self.cost_writes)

    def _forget_runtime(self, key: RuntimeKey) -> None:
        """Forget all the adapter remembers of a runtime: its memory, its warm-up, its failure said, and what each
        of `runtime_memories` keeps (`autoscaler.forgetting`)."""
        self._memory.pop(key, None)
        self._warming.pop(key, None)
        self._failing.discard(key)
        for memory in self.runtime_memories():
            memory.forget(key)

    def _publish(self, views: dict[RuntimeKey, RuntimeView], done: _RefreshPass) -> None:
        """Publish the refresh: the runtimes' self-metrics (removing the series of runtimes and values gone), the
        views the API serves, the decided views to the deletion-cost writer, and the source's counters."""
        self.metrics.publish_runtimes(views.values())
        if self.discovery_health is not None:
            self.metrics.publish_discovery(self.discovery_health())
        self.views = views
        if done.writes is not None:
            done.writes.offer(done.decided)
        self.refreshes += 1
        self.refreshed_monotonic = time.monotonic()
        self._publish_source_counters()

    def _forget_recreated(self, key: RuntimeKey, uid: str | None, was: str) -> None:
        """The runtime's Deployment was deleted and created again under its name: another runtime, whose memory
        starts again (warming up from what runs). Kept, the old runtime's slow fall was served at once for the new
        one (4 replicas for the 2 that run and need 1) and its HPA scaled it up; and its policy annotations' last
        good values read the new object's typo as the old one's floor. The view served of the old object is not
        the new one's `before` either (`_decide_runtime`)."""
        self._forget_runtime(key)
        log.info("runtime %s: its Deployment was deleted and created again (uid %s, was %s): the adapter's memory of "
                 "it starts again, from what runs", key, uid, was)

    def _decision_failed(self, key: RuntimeKey) -> None:
        """One runtime's decision raised (a bug, or a source that let a bad value through: `PodSample` says
        what the sources guarantee). The other runtimes are decided as usual; this one is left out of the
        refresh, so the API answers 404 for it and its HPA, seeing its metric fail, changes nothing (never a
        scale-down on missing data); its memory is kept for when it decides again. Logged when it starts."""
        if key not in self._failing:
            self._failing.add(key)
            log.exception("runtime %s: its decision failed; it is left out of the API until it succeeds", key)

    def _publish_source_counters(self) -> None:
        """Add to the source's self-metrics what it counted since the last refresh: reads, partial answers, errors
        by reason."""
        reads = self.source.reads  # only the scrape source counts them
        if reads > self._reported_reads:
            self.metrics.source_reads.labels(self.source.name).inc(reads - self._reported_reads)
            self._reported_reads = reads
        partial = self.source.partial_answers  # only the Prometheus source has them
        if partial > self._reported_partial:
            self.metrics.source_partial_answers.labels(self.source.name).inc(partial - self._reported_partial)
            self._reported_partial = partial
        for reason, total in self.source.errors.items():
            new = int(total) - self._reported_errors.get(reason, 0)
            if new > 0:
                self.metrics.source_errors.labels(self.source.name, reason).inc(new)
                self._reported_errors[reason] = int(total)

    async def run(self) -> None:
        """Refresh every `interval_s` until cancelled; a failed refresh is logged and retried next time.
        Timed on the monotonic clock: a wall clock stepped back an hour during a refresh would make it wait an
        hour for the next. The first waits for the RuntimeScales' first list (`FIRST_LIST_WAIT_S`)."""
        if self.scale_asks is not None and not await self.scale_asks.wait_settled(FIRST_LIST_WAIT_S):
            log.info("the RuntimeScales are not listed after %.0f s: refreshing without them; a runtime new to the "
                     "adapter is served once they are, or after its warmup_grace_s from its Deployment's replicas",
                     FIRST_LIST_WAIT_S)
        while True:
            started = self._clock.monotonic()
            try:
                await self.refresh_once()
            except Exception:
                log.exception("refresh failed; serving the previous values")
            await asyncio.sleep(max(0.0, self.interval_s - (self._clock.monotonic() - started)))


_UNASKED = ("the RuntimeScale watch did not answer its first list within warmup_grace_s, so the warm-up started "
           "from the Deployment's replicas without what the HPA last asked of the RuntimeScale (a scale-up not "
           "carried yet may be served lower, and the HPA follow); the bridge's log lines say why the list is slow, "
           "and a longer warmup_grace_s waits longer for it")


def _say_seeded_unasked(keys: list[RuntimeKey]) -> None:
    """Warn of runtimes warmed up without what their HPA last asked of the RuntimeScale: the bridge's watch did
    not list within the warm-up grace (an API server that does not answer); a line a runtime, or one for many."""
    def one(key: RuntimeKey) -> str:
        return f"runtime {key}: {_UNASKED}"

    say_each_or_counted(log, keys, one, lambda count, named: f"{count} runtimes ({named}): {_UNASKED}",
                        level=logging.WARNING)


def _warned_no_capacity(memory: RuntimeMemory | None, warm: WarmUp | None) -> bool:
    """Whether the runtime's no-capacity warning was said: its memory's, or while it warms up its warm-up's."""
    return (memory is not None and memory.warned_no_capacity) or (warm is not None and warm.warned_no_capacity)
