"""`PodWatch`: the ModelMesh pods of one scope, kept current by list + watch as client-go's reflector does.

An HPA request never waits on the API, and 10,000 pods cost one list and one stream: one watch per namespace
(or one cluster-wide watch when discovering in all namespaces) selecting `modelmesh-service`, never one per
pod or per runtime. The list + watch itself (`autoscaler.kube.list_watch`) resumes a watch that ends, lists
afresh after 410 Expired and retries any other failure with the owner's capped, jittered backoff; the first
list is served from the API server's watch cache. While the watch is broken `ok` is False and `pods` stay as
last seen, so nothing is lowered on stale knowledge (docs/design.md, Missing data); but a watch that worked, dropped
mid-stream and resumed where it left off, misses nothing: it stays `ok` unless still down
`watch_ends.DROPPED_GRACE_S` after the drop (each dropped stream served every runtime of the scope 503 until the
reopen landed).

It also counts each runtime's live pods (not terminating; by the Deployment its ReplicaSet names, else
ModelMesh's `name` label) and tells `on_runtime_pods` when a runtime's count goes to zero or up from zero: that is how a
runtime scaled to zero or back shows first, long before its Deployment is read again. O(1) per event.

Logs go to pod discovery's logger (`autoscaler.sources.kube_pods`), the one operators filter on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
from kubernetes.aio.client import ApiClient

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.failing_spell import FailingSpell
from autoscaler.kube.list_watch import ListWatch
from autoscaler.kube.paths import PODS, collection_endpoint
from autoscaler.kube.raw import JSON, Scope, scope_name
from autoscaler.kube.watch_ends import DROPPED_GRACE_S, within_grace
from autoscaler.kube.watch_health import LoopHealth, Watched, WatchHealth
from autoscaler.kube.watch_news import ScopeLine, flushed_when_stopped, watch_news
from autoscaler.source_problems import HPA_HOLDS, PODS_UNKNOWN
from autoscaler.sources.kube_objects import (
    MODELMESH_NAME_LABEL,
    PodRecord,
    after_readiness_change,
    deletion_cost_of,
    parse_pod,
)

log = logging.getLogger("autoscaler.sources.kube_pods")

CATCH_UP_S: Final = 10.0
"""How long after it synced again a watch's events count as an outage's catch-up: a resumed watch replays what
happened at once, well within it."""

PodName = tuple[str, str]
"""(namespace, name): a pod's identity in `PodWatch.pods`."""
RuntimeName = tuple[str, str]
"""(namespace, Deployment name): a runtime, as its pods' `name` label names it."""


BROKEN = ScopeLine(
    "autoscaler.sources.kube_pods", logging.WARNING,
    "Kubernetes discovery: pod watch of {scope} broken, keeping last inventory; its runtimes are unknown (503) until "
    f"it recovers, the HPA {HPA_HOLDS}: {{detail}}",
    "Kubernetes discovery: pod watches of {count} namespaces broken, keeping last inventory; their runtimes are "
    f"unknown (503) until they recover, the HPA {HPA_HOLDS}: {{scopes}} (e.g. {{scope}}: {{detail}})")
"""What its runtimes get is said as it is (`source_problems.DISCOVERY_OUTCOME`): it said they "hold their values",
which read as served, able to rise, while every value was 503 and scale-ups were blocked too."""
NOT_YET = ScopeLine(
    "autoscaler.sources.kube_pods", logging.WARNING,
    "Kubernetes discovery: pod watch of {scope} failing since the start, no inventory of it yet: its runtimes are not "
    "served until it works: {detail}",
    "Kubernetes discovery: pod watches of {count} namespaces failing since the start, no inventory of them yet: their "
    "runtimes are not served until they work: {scopes} (e.g. {scope}: {detail})")
"""A watch that never worked has no inventory to keep and no values to hold (`BROKEN` said it had). What a 403 asks
for comes with the error (`PodWatch._hinted`): said in the line, it asked for a grant of a refused connection."""
DROPPED = ScopeLine(
    "autoscaler.sources.kube_pods", logging.WARNING,
    "Kubernetes discovery: pod watch of {scope} broken, resuming it where it left off: its runtimes stay served if "
    f"it is back within {DROPPED_GRACE_S:g} s, else are unknown (503) until it recovers, the HPA {HPA_HOLDS}: "
    "{detail}",
    "Kubernetes discovery: pod watches of {count} namespaces broken, resuming them where they left off: their "
    f"runtimes stay served if they are back within {DROPPED_GRACE_S:g} s, else are unknown (503) until they "
    f"recover, the HPA {HPA_HOLDS}: {{scopes}} (e.g. {{scope}}: {{detail}})")
"""A watch that worked, dropped mid-stream (`ListWatch.resuming`): nothing is missed, so its runtimes are served
(`BROKEN` said they were 503, and they were, for every drop). Its reopen refused next is said `BROKEN`, whatever
the cause; one still down past the grace is said by the refresher's line of each runtime held."""
ESTABLISHED = ScopeLine(
    "autoscaler.sources.kube_pods", logging.INFO,
    "Kubernetes discovery: pod watch of {scope} established",
    "Kubernetes discovery: pod watches of {count} namespaces established: {scopes}",
    ends=(BROKEN, NOT_YET, DROPPED))

class PodWatch:
    """Lists then watches the pods of one scope forever (`run`); `pods` is what it last saw."""

    def __init__(
        self,
        scope: Scope,
        client: Callable[[], ApiClient],
        *,
        label_selector: str,
        request_timeout_s: float,
        watch_timeout_s: int,
        backoff: Callable[[int], float],
        on_change: Callable[[], None],
        on_runtime_pods: Callable[[str, str, bool], None] | None = None,
        health: WatchHealth | None = None,
        on_deletion_cost: Callable[[str, str, str | None], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        unanswered_backoff: Callable[[int], float] | None = None,
    ) -> None:
        """`client` returns the started API client (it raises `KubeApiError` when there is none).

        `request_timeout_s` bounds the list; `watch_timeout_s` is the server-side `timeoutSeconds` of one
        watch request, which the client-side limit exceeds by `request_timeout_s`. `backoff(n)` is the pause
        after the n-th failure in a row, `unanswered_backoff(n)` where the API server never answered
        (`ListWatch`). `on_change()` is called whenever `pods` changed.
        `on_runtime_pods(namespace, deployment, present)` is called when a runtime's live pods go to none
        (`present` False) or up from none (True). `on_deletion_cost(namespace, pod, annotation)` is called with
        each pod listed and each ADDED or MODIFIED event (the writer's echo, `DeletionCostEvents`). `health`
        counts the watch's failures and says whether it is open
        (the adapter's metrics). `sleep` waits between attempts (tests play the waits on a clock of their own).
        """
        self.scope = scope
        self.pods: dict[PodName, PodRecord] = {}
        self.deletion_costs: dict[PodName, str] = {}
        """Each pod's `controller.kubernetes.io/pod-deletion-cost` as the cluster has it, kept apart from `pods`
        (whose changes rebuild the inventory) because the writer's own patches change it: a new leader leaves
        a pod that already carries the cost it would write as it is."""
        self._current = False
        """False until the first list, and from a failure on until it syncs again; a drop (`_dropped_at`) aside."""
        self._dropped_at: float | None = None
        """When (`time.monotonic`) the watch, current until then, was dropped mid-stream to be resumed where it left
        off (`ListWatch.resuming`), while it is not back: current within `DROPPED_GRACE_S` of it (`ok`)."""
        self._error: str | None = None
        """What the watch last failed with, until it syncs again."""
        self._spell = FailingSpell(failing=True)
        """What the log said: `established` once it works (from the start), `broken` once a failing spell."""
        self._said_dropped = False
        """Whether the spell's line was `DROPPED`: a failure next that is no resumed drop says `BROKEN`, whatever
        its cause (a reopen refused with a refused connection is the drop's cause, `no_answer`, again)."""
        self._listed = False
        """Whether a list was ever handed over, so that there is an inventory to keep: failures say `BROKEN` then
        (a Role with list but not watch too), `NOT_YET` before."""
        self._client = client
        self._on_change = on_change
        self._on_runtime_pods = on_runtime_pods
        self._on_deletion_cost = on_deletion_cost
        self._live: dict[RuntimeName, int] = {}  # live pods per runtime; no entry for none
        self._first_attempt = asyncio.Event()
        self._lost_at: float | None = None
        """When the watch lost touch (its first failure since it was last caught up): changes that reach it
        after that may be late (`kube_objects.after_readiness_change`)."""
        self._catching_up_until = 0.0
        """Until when, after it synced again, its events are the outage's catch-up (a resumed watch replays
        them at once)."""
        self._loop = ListWatch(
            self._endpoint, "pods", scope,
            on_list=self._replace, on_event=self._apply_event, on_synced=self._synced, on_failure=self._failed,
            on_works=self._works, backoff=backoff, request_timeout_s=request_timeout_s, watch_timeout_s=watch_timeout_s,
            filters={"label_selector": label_selector}, list_from_cache=True,
            log=log, name=f"Kubernetes discovery: pod watch of {scope_name(scope)}", sleep=sleep,
            health=None if health is None else LoopHealth(health, Watched.PODS), unanswered_backoff=unanswered_backoff,
        )

    @property
    def ok(self) -> bool:
        """Whether what the watch has is current: False until the first list, while the watch fails, and once a
        watch dropped mid-stream is still down `DROPPED_GRACE_S` after its drop (until then nothing was missed: its
        reopen replays it)."""
        if self._dropped_at is not None and not within_grace(self._dropped_at):
            return False
        return self._current

    @ok.setter
    def ok(self, current: bool) -> None:
        self._current = current
        self._dropped_at = None

    @property
    def error(self) -> str | None:
        """What the watch last failed with, while that keeps it out of date (`ok` False), for /debug."""
        return None if self.ok else self._error

    async def run(self, first_attempt: asyncio.Event) -> None:
        """List then watch forever: resume after a clean end, re-list after 410, back off on errors.

        `first_attempt` is set once the first list has succeeded or failed."""
        self._first_attempt = first_attempt
        watch_news().started(ESTABLISHED, self.scope)
        await flushed_when_stopped(self._loop.run(), ESTABLISHED, self.scope)

    def _endpoint(self, **options: Any) -> Awaitable[aiohttp.ClientResponse]:
        return collection_endpoint(self._client(), PODS, self.scope)(**options)

    def _synced(self) -> None:
        self.ok = True
        self._error = None
        self._first_attempt.set()  # the other watches' `established` waits for this one's, or its failure
        if self._lost_at is not None:
            self._catching_up_until = time.time() + CATCH_UP_S

    def _works(self) -> None:
        """Say `established` when the watch works (`ListWatch`'s rule), not at each open: one that breaks at once
        is still broken, nor at a list (a Role without `watch` lets the list work and refuses every watch: it said
        `established` and at once `broken ... 403` of a watch that never opened)."""
        if self._loop.told_of_list:
            return
        if self._spell.works():
            self._said_dropped = False
            watch_news().say(ESTABLISHED, self.scope)

    def _failed(self, error: Exception, failures: int) -> None:
        """One failure: said once a spell (`FailingSpell`), and the watch out of date, unless it is a drop of a
        current watch that is resumed where it left off (`ListWatch.resuming`), current for `DROPPED_GRACE_S`."""
        scope = scope_name(self.scope)
        resumed = self._loop.resuming
        starts = self._spell.failed(error)
        if resumed and starts:
            self._said_dropped = True
            watch_news().say(DROPPED, self.scope, error)
        elif not resumed and (starts or self._said_dropped):
            self._said_dropped = False
            watch_news().say(BROKEN if self._listed else NOT_YET, self.scope, self._hinted(error))
        else:
            log.debug("Kubernetes discovery: pod watch of %s still failing (%d in a row): %s", scope, failures, error)
        if resumed and self._current:
            self._dropped_at = time.monotonic()
        else:
            self.ok = False
        self._error = f"pod watch of {scope} failing: {error}" if self._listed else _pods_unknown(scope, error)
        self._answered()
        if self._lost_at is None:
            self._lost_at = time.time()

    def _hinted(self, error: Exception) -> Exception:
        """`error`, a 403 with the verbs the Role lacks named: list and watch before a list worked, else the one
        refused (a Role with list but not watch on pods broke each watch with a 403 whose line asked for nothing).
        Any other error as it is: a refused connection is no Role's doing."""
        if not isinstance(error, KubeApiError) or error.status != 403:
            return error
        verb = "list and watch" if not self._listed else "list" if self._loop.listing else "watch"
        return KubeApiError(f"{error} (grant the adapter {verb} on pods there, manifests/base)", error.status,
                            error.reason, error.retry_after_s)

    def _lost_touch_at(self, now: float) -> float | None:
        """When the watch lost touch, while what reaches it may be the catch-up of that outage; else None (the
        watch sees changes as they happen), forgetting the outage once its catch-up is over."""
        if self._lost_at is not None and self._current and self._dropped_at is None and now > self._catching_up_until:
            self._lost_at = None
        return self._lost_at

    def _answered(self) -> None:
        """The watch failed: neither the start nor the other watches' `established` line wait for this one any
        longer (one that works says `established`, which waits no more either; a list alone is not its answer)."""
        self._first_attempt.set()
        watch_news().answered(ESTABLISHED, self.scope)

    def _replace(self, items: list[JSON]) -> None:
        """A fresh list: the pods are exactly these."""
        self._listed = True
        pods: dict[PodName, PodRecord] = {}
        costs: dict[PodName, str] = {}
        now = time.time()
        lost_at = self._lost_at  # a list after an outage is its catch-up (it runs before `_synced`)
        for item in items:
            pod = parse_pod(item)
            if pod is not None:
                if not pod.ready:  # (a relist after 410 keeps what the watch saw of a pod's readiness)
                    pod = after_readiness_change(self.pods.get((pod.namespace, pod.name)), pod, now, lost_at)
                pods[(pod.namespace, pod.name)] = pod
                if (cost := deletion_cost_of(item)) is not None:
                    costs[(pod.namespace, pod.name)] = cost
        before, self._live = self._live, {}
        for pod in pods.values():
            if (runtime := _live_runtime(pod)) is not None:
                self._live[runtime] = self._live.get(runtime, 0) + 1
        self.pods, self.deletion_costs = pods, costs
        self._on_change()
        for runtime in before.keys() - self._live.keys():
            self._runtime_pods(runtime, False)
        for runtime in self._live.keys() - before.keys():
            self._runtime_pods(runtime, True)
        if self._on_deletion_cost is not None:  # last: the list is folded in whatever the listener does
            for namespace, name in pods:
                self._on_deletion_cost(namespace, name, costs.get((namespace, name)))

    def _apply_event(self, kind: str, obj: JSON) -> None:
        """Fold one watch event into `pods`."""
        pod = parse_pod(obj)
        if pod is None:
            log.debug("Kubernetes discovery: ignoring malformed pod in %s event", kind)
            return
        key = (pod.namespace, pod.name)
        if kind in ("ADDED", "MODIFIED"):
            if (cost := deletion_cost_of(obj)) is not None:
                self.deletion_costs[key] = cost
            else:
                self.deletion_costs.pop(key, None)
            old = self.pods.get(key)
            if not pod.ready:
                now = time.time()
                pod = after_readiness_change(old, pod, now, self._lost_touch_at(now))
            if old != pod:  # most MODIFIED events (annotation writes, status chatter) change nothing
                self.pods[key] = pod
                self._on_change()
                self._count(old, pod)
            if self._on_deletion_cost is not None:  # last: the event is folded in whatever the listener does
                self._on_deletion_cost(pod.namespace, pod.name, cost)
        elif kind == "DELETED":
            self.deletion_costs.pop(key, None)
            if (old := self.pods.pop(key, None)) is not None:
                self._on_change()
                self._count(old, None)
        else:
            log.debug("Kubernetes discovery: ignoring %r event", kind)

    def _count(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """Move one pod's place in the live counts from what it was (`old`) to what it is (`new`)."""
        was, now = _live_runtime(old), _live_runtime(new)
        if was == now:
            return
        if was is not None:
            left = self._live[was] - 1
            if left:
                self._live[was] = left
            else:
                del self._live[was]
                self._runtime_pods(was, False)
        if now is not None:
            count = self._live.get(now, 0)
            self._live[now] = count + 1
            if not count:
                self._runtime_pods(now, True)

    def _runtime_pods(self, runtime: RuntimeName, present: bool) -> None:
        if self._on_runtime_pods is not None:
            self._on_runtime_pods(runtime[0], runtime[1], present)


def _pods_unknown(scope: str, error: Exception) -> str:
    """/debug's words for a pod watch whose list never worked (`PODS_UNKNOWN`): its pods are unknown, and why."""
    status = error.status if isinstance(error, KubeApiError) else None
    why = "is refused" if status in (401, 403) else "fails"
    hint = " (grant the adapter list and watch on pods there, manifests/base)" if status == 403 else ""
    return (f"{PODS_UNKNOWN.format(scope=scope)}its pod list {why} ({error}){hint}; its runtimes are not served "
            "until it works")


def _live_runtime(pod: PodRecord | None) -> RuntimeName | None:
    """The runtime a live (not terminating) pod belongs to: the Deployment its ReplicaSet says runs it, else
    ModelMesh's `name` label (the same Deployment, for modelmesh-serving's pods); None for a pod that is gone,
    terminating, or has neither (those runtimes wait for the periodic Deployment read). The owner comes first:
    a runtime of one's own need not carry `name`, and a relabelled pod still runs where its owner says."""
    if pod is None or pod.terminating:
        return None
    name = pod.deployment or pod.labels.get(MODELMESH_NAME_LABEL)
    return None if name is None else (pod.namespace, name)
