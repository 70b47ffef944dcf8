"""`RuntimeScaleWatch`: wakes the replica bridge as soon as a RuntimeScale changes, so the HPA's write to the
scale subresource reaches `ServingRuntime.spec.replicas` within a round trip instead of a resync interval.

It hands the bridge each RuntimeScale that changed (after a relist or a deletion: all of them), and keeps each
runtime Deployment's RuntimeScale `spec.replicas` (`replicas_for`): what the HPA last asked for is part of "what
runs" for a runtime the adapter has no memory of (`autoscaler.policies.warmup`), on every replica, leader or not.
Where two RuntimeScales name one ServingRuntime, only the owner's ask counts (`bridge_owners`): it is the one the
bridge carries, so the other's is not what runs.

It also says, on every replica, which RuntimeScales' status does not answer their spec (`StatusReport`,
`bridge_status.status_stale`): only the leader writes a status, so with no leader, or a leader whose bridge does
not carry, READY keeps what was last written (True, Bridged) while the HPA's asks reach nothing; the replicas
that do not lead are the ones left to say so.

The list + watch is `autoscaler.kube.list_watch`'s: a watch that ends is resumed from the last version seen; one
the server no longer retains (410, as an ERROR event or a status) is replaced by a fresh list; other failures
back off (capped, jittered; to about 4 s where the API server never answered, `backoff.UNANSWERED_MAX_S`, so that
after an outage the HPA's writes are carried within seconds of its return) and the bridge's own resync covers the
gap. Every (re)list also wakes the bridge:
events may have been missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

from autoscaler.actuation.bridge_owners import RuntimeOwners
from autoscaler.actuation.bridge_status import RUNTIME_SCALES, status_stale
from autoscaler.kube.backoff import UNANSWERED_MAX_S, spread_delay
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.failing_spell import FailingSpell
from autoscaler.kube.list_watch import ListWatch
from autoscaler.kube.raw import JSON, Endpoint, object_key, scope_name
from autoscaler.kube.watch_health import LoopHealth, Watched, WatchHealth
from autoscaler.kube.watch_news import ScopeLine, flushed_when_stopped, watch_news
from autoscaler.model import RuntimeKey

log = logging.getLogger("autoscaler.actuation.bridge")

# What each namespace's RuntimeScale watch says, a line each, or one line for more than ten namespaces at once
# (an API server restart breaks all of them together: `autoscaler.kube.watch_news`).
CRD_MISSING = ScopeLine(
    log.name, logging.WARNING,
    f"replica bridge: the RuntimeScale CRD {RUNTIME_SCALES.plural}.{RUNTIME_SCALES.group} is not installed "
    "({detail}): no HPA write reaches a ServingRuntime until it is; apply manifests/base "
    "(custom-resource-definition-runtimescales.yaml)",
    f"replica bridge: the RuntimeScale CRD {RUNTIME_SCALES.plural}.{RUNTIME_SCALES.group} is not installed "
    "(the watches of {count} namespaces: {scopes}; e.g. {detail}): no HPA write reaches a ServingRuntime until it "
    "is; apply manifests/base (custom-resource-definition-runtimescales.yaml)")
LIST_FAILING = ScopeLine(
    log.name, logging.WARNING,
    "replica bridge: RuntimeScale list of {scope} failing; no HPA write reaches a ServingRuntime until it works "
    "(the bridge's resync lists them too; a 403 is the adapter's ClusterRole without list and watch on "
    f"{RUNTIME_SCALES.plural}, manifests/base): {{detail}}",
    "replica bridge: RuntimeScale lists of {count} namespaces failing; no HPA write reaches their ServingRuntimes "
    "until they work (the bridge's resync lists them too; a 403 is the adapter's ClusterRole without list and "
    f"watch on {RUNTIME_SCALES.plural}, manifests/base): {{scopes}} (e.g. {{scope}}: {{detail}})")
WATCH_FAILING = ScopeLine(
    log.name, logging.WARNING,
    "replica bridge: RuntimeScale watch of {scope} failing; HPA writes reach ServingRuntimes at the next resync "
    "instead of at once: {detail}",
    "replica bridge: RuntimeScale watches of {count} namespaces failing; HPA writes reach their ServingRuntimes at "
    "the next resync instead of at once: {scopes} (e.g. {scope}: {detail})")
WORKS_AGAIN = ScopeLine(
    log.name, logging.INFO,
    "replica bridge: RuntimeScale watch of {scope} works again",
    "replica bridge: RuntimeScale watches of {count} namespaces work again: {scopes}",
    ends=(CRD_MISSING, LIST_FAILING, WATCH_FAILING))


def crd_missing(error: Exception) -> bool:
    """Whether a list or watch of RuntimeScales failed because the API server does not serve them: a 404 on a
    collection (a namespace that does not exist lists empty) is a resource type without its CRD."""
    return isinstance(error, KubeApiError) and error.status == 404


class WatchClient(Protocol):
    """What the watch needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it)."""

    @property
    def request_timeout_s(self) -> float: ...

    def custom_endpoint(self, resource: CustomResource, namespace: str | None) -> Endpoint: ...


class StatusReport(Protocol):
    """Where the watch says whether each RuntimeScale's status answers its spec (the adapter's metrics)."""

    def runtime_scale_status_seen(self, namespace: str, name: str, stale: bool) -> None: ...


class RuntimeScaleWatch:
    """Lists then watches the RuntimeScales of one scope (`run`), calling `on_change(scale)` with each one added or
    changed, and `on_change(None)` after a (re)list or a deletion: then everything is to be looked at."""

    def __init__(
        self,
        client: WatchClient,
        scope: str | None,
        on_change: Callable[[JSON | None], None],
        *,
        watch_timeout_s: int = 300,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        health: WatchHealth | None = None,
        statuses: StatusReport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`health` counts the watch's failures and says whether it is open, `statuses` hears whether each
        RuntimeScale's status answers its spec (both: the adapter's metrics). `sleep` waits between attempts (tests
        play the waits on a clock of their own)."""
        self.scope = scope
        self._on_change = on_change
        self._statuses = statuses
        self._judged: set[tuple[str, str]] = set()  # the RuntimeScales told to `statuses`, to forget at a relist
        # Indexed by runtime: `replicas_for` runs for runtimes warming up each refresh, and a scan of every
        # RuntimeScale per runtime cost 5,000 x 5,000 comparisons (seconds) a refresh.
        self._owners = RuntimeOwners()
        self._settled = asyncio.Event()  # the first list answered, or failed (`settled`)
        self._spell = FailingSpell(failing=False)  # a failure was warned about and its recovery not said yet
        self._loop = ListWatch(
            client.custom_endpoint(RUNTIME_SCALES, scope), RUNTIME_SCALES.plural, scope,
            on_list=self._listed, on_event=self._changed, on_failure=self._failed, on_works=self._works,
            backoff=partial(spread_delay, initial_s=backoff_base_s, cap_s=backoff_cap_s),
            # After an outage the HPA's scale reaches the runtime within seconds of the API's return, not up to
            # the 30 s cap later: a try the server never answered costs it nothing.
            unanswered_backoff=partial(spread_delay, initial_s=backoff_base_s,
                                       cap_s=min(backoff_cap_s, UNANSWERED_MAX_S)),
            request_timeout_s=client.request_timeout_s, watch_timeout_s=watch_timeout_s,
            log=log, name=f"replica bridge: RuntimeScale watch of {scope_name(scope)}", sleep=sleep,
            health=None if health is None else LoopHealth(health, Watched.RUNTIME_SCALES),
        )

    async def run(self) -> None:
        """List then watch until cancelled; what the watches had still to say is said when one stops."""
        await flushed_when_stopped(self._loop.run(), WORKS_AGAIN, self.scope)

    @property
    def settled(self) -> bool:
        """Whether `replicas_for` says what it can: the first list answered, or failed (said in the log: the
        CRD missing, a ClusterRole without list). Before, a runtime's None may be a RuntimeScale not listed
        yet; a runtime warming up waits for it (`autoscaler.actuation.scale_asks`)."""
        return self._settled.is_set()

    async def wait_settled(self) -> None:
        """Until `settled`."""
        await self._settled.wait()

    def replicas_for(self, key: RuntimeKey) -> int | None:
        """The `spec.replicas` of the RuntimeScale that scales runtime Deployment `key` (its runtime's owner, the
        oldest, where several name it), if one is seen and has replicas."""
        return self._owners.owner_replicas(key.namespace, key.deployment)

    def _listed(self, items: list[JSON]) -> None:
        self._owners = RuntimeOwners()
        gone, self._judged = self._judged, set()
        for item in items:
            self._remember("ADDED", item)
        for key in gone - self._judged:  # deleted while the watch was down: its DELETED event never came
            self._judge(key, None)
        self._settled.set()
        self._on_change(None)

    def _changed(self, kind: str, obj: JSON) -> None:
        self._remember(kind, obj)
        self._on_change(None if kind == "DELETED" else obj)

    def _remember(self, kind: str, scale: JSON) -> None:
        key = object_key(scale, self.scope)
        if kind == "DELETED":
            self._owners.drop(key)
            self._judge(key, None)
        else:  # where it was is forgotten: its runtime (or replicas) may have changed
            self._owners.note(key, scale)
            self._judge(key, scale)

    def _judge(self, key: tuple[str, str], scale: JSON | None) -> None:
        """Tell `statuses` whether RuntimeScale `key` (None: gone) has a status that answers its spec."""
        if self._statuses is None:
            return
        if scale is None:
            self._judged.discard(key)
        else:
            self._judged.add(key)
        self._statuses.runtime_scale_status_seen(*key, scale is not None and status_stale(scale))

    def _failed(self, error: Exception, failures: int) -> None:
        """Warn when the watch starts failing (a Role with `list` but not `watch` on runtimescales said
        nothing at all: HPA writes silently took a resync instead of a round trip); the rest at DEBUG. A failing
        list is no such delay: the bridge's resync lists the same collection, so nothing is carried until it
        works (the line said "at the next resync"). A 404 is the CRD not installed: the line says what to apply
        (the bridge's own list failure is DEBUG then: this line, on every replica, is the one that says it)."""
        if self._spell.failed(error):
            line = CRD_MISSING if crd_missing(error) else LIST_FAILING if self._loop.listing else WATCH_FAILING
            watch_news().say(line, self.scope, error)
        else:
            log.debug("replica bridge: RuntimeScale watch failed (%d in a row): %s", failures, error)
        self._settled.set()

    def _works(self) -> None:
        """Say "works again" when the watch works (`ListWatch`'s rule: a list handed over, a watch run to its end
        or open a while), not at each open: one that fails on the object it replays at once still fails."""
        if self._spell.works():
            watch_news().say(WORKS_AGAIN, self.scope)
