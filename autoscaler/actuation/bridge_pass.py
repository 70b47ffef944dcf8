"""The replica bridge's full pass (`FullPass`, run by `ReplicaBridge.sync`): every RuntimeScale of every scope
reconciled from three lists a namespace (RuntimeScales, ServingRuntimes, ModelMesh Deployments), and what the pass
has done so far. Reading two objects per RuntimeScale instead was 10,000 sequential requests a pass at 5,000
runtimes, longer than the resync interval.

A RuntimeScale handed over while a full pass runs is reconciled between two of the pass's RuntimeScales, not after
the last (a new leader's first pass writes every status, one round trip each: an HPA's scale-up waited tens of
seconds for it), one at the pass's start and after each RuntimeScale it wrote, so the pass takes about two round
trips a RuntimeScale it writes however many HPAs write, and none for one it leaves; the pass then skips it unless it
listed a newer spec, so an older listed `spec.replicas` never overwrites the HPA's. The hand-overs themselves, and
the turn they take, are the bridge's (`PassHost`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autoscaler.actuation.bridge_memory import ScaleMemory, generation, older_generation
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_reconcile import Listed, Objects, ReconcileClient
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.actuation.bridge_status import RUNTIME_SCALES, SERVING_RUNTIMES
from autoscaler.actuation.bridge_watch import crd_missing
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON, object_key
from autoscaler.names import MODELMESH_SERVICE_LABEL
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger("autoscaler.actuation.bridge")


class BridgeClient(ReconcileClient, Protocol):
    """What the bridge needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it): the lists of a full
    pass, and what one RuntimeScale's reconcile reads and writes (`ReconcileClient`)."""

    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON: ...

    async def list_deployments(self, namespace: str | None, label_selector: str) -> JSON: ...


class PassHost(Protocol):
    """What a full pass asks of the bridge that runs it (`ReplicaBridge`): its hand-over queue, and one
    RuntimeScale reconciled with its failure said and its retry scheduled."""

    def handed_over(self) -> bool:
        """Whether a hand-over waits."""
        ...

    async def between(self, listed: dict[ScaleId, JSON], done: dict[ScaleId, JSON]) -> int | None:
        """The hand-over's turn between two of the pass's RuntimeScales: the writes made, or None to stop."""
        ...

    def newest_ask(self, key: ScaleId, listed: JSON) -> JSON:
        """The RuntimeScale as the pass reconciles it: `listed`, or a newer spec handed over meanwhile."""
        ...

    async def reconcile_guarded(self, key: ScaleId, scale: JSON, known: Listed | None) -> int:
        """One RuntimeScale reconciled; the writes made (0 where it failed: its retry is scheduled)."""
        ...

    def forget(self, key: ScaleId) -> None:
        """The RuntimeScale is gone: what the bridge remembers of it goes too."""
        ...

    def full_due(self) -> None:
        """Another full pass is due at the next wake-up (this one stopped for the server's `Retry-After`)."""
        ...


@dataclass(slots=True)
class _Pass:
    """What one full pass has done so far, scope after scope (`_sync_scope`)."""

    writes: int = 0
    seen: set[ScaleId] = field(default_factory=set)
    """The RuntimeScales listed: one remembered but not among them, in a scope that was listed, is gone."""
    handed: dict[ScaleId, JSON] = field(default_factory=dict)
    """Reconciled from a hand-over during this pass (`between`): their listed spec is skipped unless newer."""
    unlisted: set[str | None] = field(default_factory=set)
    """Scopes whose list failed: what they hold is unknown, not gone."""
    failed: bool = False
    """Whether anything failed in it (`warn_and_fail_pass`, a list refused): only a pass that failed nowhere
    makes the causes warned about news again."""
    turn_due: bool = True
    """Whether a waiting hand-over takes its turn before the pass's next RuntimeScale: at its start and after each
    one it wrote. A turn before every RuntimeScale made a settled fleet's pass, which writes nothing and takes no
    round trip of its own, one round trip a RuntimeScale while HPAs wrote (1,000 RuntimeScales, 20 HPAs: 67 s a
    pass against 0.15 s)."""


class FullPass:
    """Runs the bridge's full passes, one at a time, and keeps what the running one (or the last) has done, and
    which failure causes were warned about."""

    def __init__(self, client: BridgeClient, host: PassHost, *, scopes: Sequence[str | None],
                 memory: dict[ScaleId, ScaleMemory], owners: RuntimeOwners, covered: set[str | None],
                 retries: RetrySchedule, throttle: ServerThrottle, metrics: AdapterMetrics | None,
                 may_write: Callable[[], bool]) -> None:
        """`covered`: the namespaces (None: all) whose RuntimeScales `owners` holds, shared with the bridge."""
        self._client = client
        self._host = host
        self._scopes = scopes
        self._memory = memory
        self._owners = owners
        self._covered = covered
        self._retries = retries
        self._throttle = throttle
        self._metrics = metrics
        self._may_write = may_write
        # The causes warned about (a status, or a list's message) since the last pass that failed nowhere: one
        # WARNING each. Remembering only the last one warned again at every resync when two causes alternate (a
        # ClusterRole without get/list on ServingRuntimes fails the list, then each RuntimeScale's read).
        self._warned: set[str] = set()
        self._pass = _Pass()  # the full pass running, or the last one

    async def run(self) -> int:
        """One pass over every scope, while leading and the server's `Retry-After` does not hold the bridge;
        returns the number of writes made. What a listed scope no longer holds is forgotten."""
        self._retries.pass_started(full=True)
        this_pass = self._pass = _Pass()
        for scope in self._scopes:
            if not await self._sync_scope(scope, this_pass):
                return this_pass.writes
        if None in this_pass.unlisted:
            return this_pass.writes
        for key in {*self._memory, *self._retries.keys()} - this_pass.seen:
            if key[0] not in this_pass.unlisted:
                self._host.forget(key)
                self._retries.forget(key)
        if not this_pass.failed and not self._retries.keys():  # a whole pass without a failure: causes are news again
            self._warned.clear()
        return this_pass.writes

    async def _sync_scope(self, scope: str | None, this_pass: _Pass) -> bool:
        """The full pass over one scope: its RuntimeScales listed (each noted in `this_pass`, or the scope as
        unlisted where the list fails) and reconciled from the scope's lists, with the hand-overs waiting
        reconciled in between. Returns whether the pass goes on: not once this replica stopped leading, the
        server's `Retry-After` holds the bridge, or a hand-over moved a runtime's owner."""
        try:
            listed = await self._client.list_custom(RUNTIME_SCALES, scope)
        except KubeApiError as error:
            if crd_missing(error):  # said at WARNING by the scope's watch, on every replica
                this_pass.failed = True
                log.debug("replica bridge: cannot list RuntimeScales in %s: %s", scope or "all namespaces", error)
            else:
                self.warn_and_fail_pass(f"cannot list RuntimeScales in {scope or 'all namespaces'}: {error}")
                if self._metrics is not None:  # no status can say it: the bridge sees no RuntimeScale there
                    self._metrics.bridge_runtime_scale_list_failures.inc()
            self._throttle.note(error)
            this_pass.unlisted.add(scope)
            return True
        items = keyed(listed, scope)
        self._owners.replace(scope, items)
        self._covered.add(scope)
        known = await self._list_targets(scope) if items else Listed({}, {})
        this_scope = dict(items)
        handed = this_pass.handed
        # Those with a retry first (in list order otherwise): the pass a retry falls due for is a full one, and an
        # ask held for that retry waited for the pass to reach it (seconds at 300 RuntimeScales under load).
        retried = self._retries.keys()
        for key, scale in sorted(items, key=lambda item: item[0] not in retried):
            this_pass.seen.add(key)
            if this_pass.turn_due and self._host.handed_over() and self._may_write() and not self._throttled():
                between = await self._host.between(this_scope, handed)
                if between is None:
                    return False
                this_pass.writes += between
                this_pass.turn_due = False
            memory = self._memory.get(key)
            if ((key in handed and not older_generation(generation(handed[key]), generation(scale)))
                    or (memory is not None and memory.reconciled_newer_than(scale))):
                continue  # reconciled from its hand-over during this pass: the listed spec is no newer
            if self._retries.waits(key, scale):
                continue
            if not self._may_write():
                return False
            if self._throttled():  # the rest waits with it; nothing it held is forgotten
                self._host.full_due()
                return False
            wrote = await self._host.reconcile_guarded(key, self._host.newest_ask(key, scale), known)
            this_pass.writes += wrote
            this_pass.turn_due = this_pass.turn_due or wrote > 0
        return True

    async def _list_targets(self, scope: str | None) -> Listed:
        """The ServingRuntimes and ModelMesh Deployments of `scope`, each by (namespace, name); a list that fails
        (say, a ClusterRole from before `list` on ServingRuntimes) leaves its objects to be read one by one."""
        try:
            runtimes: Objects | None = dict(keyed(await self._client.list_custom(SERVING_RUNTIMES, scope), scope))
        except KubeApiError as error:
            self.warn_and_fail_pass(f"cannot list ServingRuntimes in {scope or 'all namespaces'}, reading them one "
                                    f"by one: {error}")
            self._throttle.note(error)
            runtimes = None
        try:
            # A full pass lists the runtime Deployments (a RuntimeScale whose `spec.deployment` names another
            # is read on its own).
            deployments: Objects | None = dict(
                keyed(await self._client.list_deployments(scope, MODELMESH_SERVICE_LABEL), scope))
        except KubeApiError as error:
            self.warn_and_fail_pass(f"cannot list Deployments in {scope or 'all namespaces'}, reading them one by "
                                    f"one: {error}")
            self._throttle.note(error)
            deployments = None
        return Listed(runtimes, deployments)

    def _throttled(self) -> bool:
        return self._throttle.remaining() > 0

    def warn_and_fail_pass(self, message: str, kind: str | None = None) -> None:
        """Say a failure, at WARNING the first time its cause (`kind`, else the message) is met since the last
        pass that failed nowhere, and mark the pass failed, which keeps the causes warned about until then."""
        cause = kind or message
        level = logging.WARNING if cause not in self._warned else logging.DEBUG
        self._warned.add(cause)
        self._pass.failed = True
        log.log(level, "replica bridge: %s", message)


def keyed(listed: JSON, scope: str | None) -> list[tuple[ScaleId, JSON]]:
    """A list's items (RuntimeScales, ServingRuntimes, Deployments) with their (namespace, name), the namespace
    listed in where an item leaves it out; `dict(...)` of it holds them by that key."""
    return [(object_key(item, scope), item) for item in listed.get("items") or [] if isinstance(item, dict)]
