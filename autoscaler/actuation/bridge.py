"""The replica bridge (docs/design.md): the HPA scales a `RuntimeScale`; the adapter's leader carries its
`spec.replicas` to `ServingRuntime.spec.replicas`, which every modelmesh-serving release applies to the runtime
Deployment, and reports the Deployment back in the RuntimeScale's `status` (replicas, selector, conditions).

Why not let the HPA scale the Deployment: the modelmesh-serving controller sets the Deployment's replicas from
the ServingRuntime on every reconcile and reconciles on every change of the Deployment, so an HPA's change is
reverted at once; its webhook rejects unknown autoscaler classes and class `hpa` adds a second HPA.

How (`ReplicaBridge`): each RuntimeScale is reconciled against its ServingRuntime and Deployment, writing
only what differs: a merge patch of `ServingRuntime.spec.replicas`, a merge patch of the RuntimeScale's `status`
subresource, and (once, for a RuntimeScale created without replicas) its `spec.replicas` adopted from the
runtime so that the HPA's first read of the scale works (until then the API server refuses that read, so no
scaler can write first), conditional on the version read so that replicas set since are kept. A RuntimeScale
that changes (`RuntimeScaleWatch` hands it over: the HPA's write) is reconciled alone at once, reading its two
objects: the write reaches the runtime within a round trip at any fleet size.
Every `resync_interval_s` (Deployment replicas change without touching
the RuntimeScale), after a relist and when a retry falls due, a full pass reconciles them all from three lists
a namespace (RuntimeScales, ServingRuntimes, ModelMesh Deployments): reading two objects per RuntimeScale
instead was 10,000 sequential requests a pass at 5,000 runtimes, longer than the resync interval. It runs on
its own task, so a slow API server never delays a refresh or an HPA request. A RuntimeScale handed over while a
full pass runs is reconciled between two of the pass's RuntimeScales, not after the last (a new leader's first
pass writes every status, one round trip each: an HPA's scale-up waited tens of seconds for it); the pass then
skips it unless it listed a newer spec, so an older listed `spec.replicas` never overwrites the HPA's.
Failures are per RuntimeScale: 409/429/5xx and no answer are retried with exponential backoff and jitter,
others (403: RBAC) wait for the next resync, and the retries due go out together in one pass (`bridge_retries`
has the schedule and why). A `Retry-After` (429 from API Priority and Fairness, which throttles the adapter's
whole flow) holds every call of the bridge until it has passed: the pass stops there, and an HPA write handed
over meanwhile waits for the pass after it, instead of one doomed request per RuntimeScale. Only the leader
writes; all state lives in the cluster, so a new leader (or a restarted adapter) simply carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from autoscaler.actuation.bridge_memory import ScaleMemory, generation, older_generation
from autoscaler.actuation.bridge_news import PassWrites, ReasonChanges, shown_replicas
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.actuation.bridge_status import (
    CLUSTER_SERVING_RUNTIMES,
    RUNTIME_SCALES,
    SERVING_RUNTIMES,
    Verdict,
    autoscaler_class,
    bridged_spec,
    deployment_name,
    desired_status,
    duplicate,
    misplaced_policy_annotations,
    not_read,
    not_written,
    replicas_of,
    verdict,
)
from autoscaler.actuation.bridge_watch import crd_missing
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.client import CustomResource
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import object_key
from autoscaler.kube.timestamps import rfc3339
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)

JSON = dict[str, Any]


class BridgeClient(Protocol):
    """What the bridge needs from Kubernetes (`autoscaler.kube.client.KubeClient` has it)."""

    async def list_custom(self, resource: CustomResource, namespace: str | None) -> JSON: ...

    async def list_deployments(self, namespace: str | None, label_selector: str) -> JSON: ...

    async def get_custom(self, resource: CustomResource, namespace: str | None, name: str) -> JSON | None: ...

    async def get_deployment(self, namespace: str, name: str) -> JSON | None: ...

    async def merge_patch_custom(
        self, resource: CustomResource, namespace: str, name: str, patch: JSON, *, subresource: str | None = None
    ) -> JSON: ...


class NotLeading(Exception):
    """A write was about to go out after this replica stopped leading: the reconcile ends there."""


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    resync_interval_s: float = 15.0
    """Every RuntimeScale is reconciled at least this often (seconds): the HPA's sync period, so the
    `status.replicas` it reads is at most one period old."""
    backoff_base_s: float = 1.0
    """First retry delay after a retryable failure; doubles with each further failure."""
    backoff_cap_s: float = 60.0
    """Longest retry delay."""


MODELMESH_DEPLOYMENTS: Final = "modelmesh-service"
"""The label modelmesh-serving puts on every runtime Deployment: a full pass lists those (a RuntimeScale whose
`spec.deployment` names another is read on its own)."""

Objects = dict[tuple[str, str], JSON]
"""Listed objects by (namespace, name)."""


@dataclass(frozen=True, slots=True)
class _Listed:
    """One full pass's ServingRuntimes and Deployments; None where a list failed (then read one by one)."""

    runtimes: Objects | None
    deployments: Objects | None


@dataclass(slots=True)
class _Pass:
    """What one full pass has done so far, scope after scope (`_sync_scope`)."""

    writes: int = 0
    seen: set[ScaleId] = field(default_factory=set)
    """The RuntimeScales listed: one remembered but not among them, in a scope that was listed, is gone."""
    handed: dict[ScaleId, JSON] = field(default_factory=dict)
    """Reconciled from a hand-over during this pass (`_between`): their listed spec is skipped unless newer."""
    unlisted: set[str | None] = field(default_factory=set)
    """Scopes whose list failed: what they hold is unknown, not gone."""
    failed: bool = False
    """Whether anything failed in it (`_warn_and_fail_pass`, a list refused): only a pass that failed nowhere
    makes the causes warned about news again."""


class ReplicaBridge:
    """Keeps every watched RuntimeScale and its ServingRuntime in step; run `run()` as its own task."""

    def __init__(
        self,
        client: BridgeClient,
        *,
        namespaces: Sequence[str] = (),
        settings: BridgeSettings | None = None,
        metrics: AdapterMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """`namespaces` to reconcile RuntimeScales in; empty: all namespaces."""
        self._client = client
        self.scopes: tuple[str | None, ...] = tuple(namespaces) or (None,)
        self.settings = settings or BridgeSettings()
        self._metrics = metrics
        self._may_write = may_write
        self._clock = clock
        self._wake = asyncio.Event()
        self._full = True  # a full pass is due (first run, a relist, leadership)
        self._changed: dict[ScaleId, JSON] = {}  # RuntimeScales the watch saw change since the last pass
        self._memory: dict[ScaleId, ScaleMemory] = {}  # what each RuntimeScale's last reconciles left
        # Which RuntimeScale owns each ServingRuntime (one per runtime, the oldest): from each full pass's list of
        # a scope, kept current by the watch's hand-overs; deletions come with a full pass (the watch wakes one).
        self._owners = RuntimeOwners()
        self._covered: set[str | None] = set()  # namespaces (None: all) whose RuntimeScales `_owners` holds
        self._reason_changes = ReasonChanges()  # new Ready reasons, logged after a pass
        self._writes = PassWrites()  # replicas carried and adopted, logged after a pass
        # The causes warned about (a status, or a list's message) since the last pass that failed nowhere: one
        # WARNING each. Remembering only the last one warned again at every resync when two causes alternate (a
        # ClusterRole without get/list on ServingRuntimes fails the list, then each RuntimeScale's read).
        self._warned: set[str] = set()
        self._pass = _Pass()  # the full pass running, or the last one
        self._throttle = ServerThrottle(self.settings.backoff_cap_s, clock)  # no call before it has passed
        self._retries = RetrySchedule(self._throttle, backoff_base_s=self.settings.backoff_base_s,
                                      backoff_cap_s=self.settings.backoff_cap_s,
                                      resync_interval_s=self.settings.resync_interval_s, clock=clock, rand=rand)

    def wake(self, scale: JSON | None = None) -> None:
        """Reconcile now: `scale` alone (a RuntimeScale the watch saw added or changed), or every one (None: a
        relist, a deletion, or leadership changed)."""
        if scale is None:
            self._full = True
        else:
            self._changed[object_key(scale)] = scale
        self._wake.set()

    async def run(self) -> None:
        """Reconcile what changed on every wake-up, and everything every resync interval, after a relist and
        when a retry falls due, until cancelled."""
        while True:
            try:
                if self._full:
                    await self.sync()
                else:
                    await self.sync_changed()
            except Exception:
                log.exception("replica bridge pass failed; trying again at the next resync")
            try:
                async with asyncio.timeout(self.next_pass_in_s()):
                    await self._wake.wait()
            except TimeoutError:
                self._full = True  # the resync, or a retry fell due
            self._wake.clear()

    async def sync_changed(self) -> int:
        """Reconcile only the RuntimeScales the watch handed over since the last pass; returns the writes made."""
        try:
            return await self._sync_changed()
        finally:
            self._writes.flush()
            self._reason_changes.flush()

    async def _sync_changed(self) -> int:
        if self._throttled():
            return 0  # kept in `_changed`: the pass after the server's wait reads them all
        self._retries.pass_started(full=False)
        todo = self._take_changed({})
        # All of them noted before any is reconciled: a RuntimeScale and its copy handed over together must not
        # each find itself alone on the runtime.
        if self._note_moves_an_owner(todo):
            # An owner pointed at another runtime (or a same-second copy that sorts first): the RuntimeScale that
            # owns the runtime now was not handed over, nor the one that no longer does. One pass over all.
            return await self._sync()
        return await self._reconcile_changed(todo, {})

    def _take_changed(self, listed: dict[ScaleId, JSON]) -> dict[ScaleId, JSON]:
        """The hand-overs waiting (now taken), less our own writes handed back and those older than the spec
        already reconciled, or than `listed` (the running pass's list, which reconciles that one in its turn):
        the watch stream can lag behind the bridge's own reads."""
        changed, self._changed = self._changed, {}
        todo: dict[ScaleId, JSON] = {}
        for key, scale in changed.items():
            version = (scale.get("metadata") or {}).get("resourceVersion")
            memory = self._memory.get(key)
            if version is not None and memory is not None and version == memory.written:
                continue  # our own write, handed back
            if memory is not None and memory.reconciled_newer_than(scale):
                continue  # a late event: a newer spec was reconciled already
            if key in listed and older_generation(generation(scale), generation(listed[key])):
                continue  # a late event: the pass has a newer spec listed
            todo[key] = scale
        return todo

    async def _reconcile_changed(self, todo: dict[ScaleId, JSON], done: dict[ScaleId, JSON]) -> int:
        """Reconcile the hand-overs `todo` (noted in `_owners`) one by one, reading their runtimes; each one tried
        is put in `done`. Returns the writes made; stops where this replica stopped leading, or where the
        server's `Retry-After` holds the bridge (the rest back in `_changed`)."""
        writes = 0
        for key, scale in todo.items():
            if not self._may_write():
                return writes
            if self._throttled():
                self._changed = {**{k: v for k, v in todo.items() if k not in done}, **self._changed}
                return writes
            done[key] = scale
            if not self._covers(key[0]):
                try:
                    await self._cover(key[0])
                except KubeApiError as error:
                    self._failed(key, error)  # its owner is not known: nothing written until it is
                    continue
            writes += await self._reconcile_guarded(key, scale, None)
        return writes

    async def _between(self, listed: dict[ScaleId, JSON], done: dict[ScaleId, JSON]) -> int | None:
        """The hand-overs waiting while a full pass runs, reconciled between two of its RuntimeScales: waiting
        for the pass to end held an HPA's scale-up back by the whole pass (a new leader's first pass writes the
        status of every RuntimeScale, a round trip each: tens of seconds with a slow API server).

        `listed`: the pass's RuntimeScales of the scope it is in; `done` collects the ones reconciled here, which
        the pass then leaves alone unless it lists a newer spec (its older `spec.replicas` would undo the
        HPA's). Returns the writes made, or None when a hand-over moves a runtime to another owner: the new owner
        may be behind the pass already, so the pass stops and a new one, which lists again, follows at once
        (`_full`), as `sync_changed` does for it."""
        todo = self._take_changed(listed)
        if not todo:
            return 0
        if self._note_moves_an_owner(todo):
            self._full = True
            self._wake.set()
            return None
        return await self._reconcile_changed(todo, done)

    def _note_moves_an_owner(self, scales: dict[ScaleId, JSON]) -> bool:
        """Note `scales` in `_owners`; whether a runtime they named or name now changed hands (from one
        RuntimeScale to another: a first claim moves nothing)."""
        runtimes: set[tuple[str, str]] = set()
        for key, scale in scales.items():
            claim = self._owners.claim(key)
            if claim is not None:
                runtimes.add(claim.runtime)
            named = (scale.get("spec") or {}).get("servingRuntime")
            if isinstance(named, str) and named:
                runtimes.add((key[0], named))
        before = {runtime: self._owners.owner(runtime) for runtime in runtimes}
        for key, scale in scales.items():
            self._owners.note(key, scale)
        return any(owner is not None and self._owners.owner(runtime) != owner for runtime, owner in before.items())

    def _covers(self, namespace: str) -> bool:
        return None in self._covered or namespace in self._covered

    async def _cover(self, namespace: str) -> None:
        """List the RuntimeScales of `namespace` into `_owners` (a hand-over before the first full pass of this
        leader): who owns a runtime is only known from all the RuntimeScales that name it."""
        listed = await self._client.list_custom(RUNTIME_SCALES, namespace)
        self._owners.replace(namespace, _keyed(listed, namespace))
        self._covered.add(namespace)

    async def sync(self) -> int:
        """One pass over every RuntimeScale; returns the number of writes made. The RuntimeScales whose
        `Ready` reason changed are logged at the end of the pass: one line each, or, when more than ten changed
        (the first pass of every new leader finds them all), one line per reason with how many."""
        try:
            return await self._sync()
        finally:
            self._writes.flush()
            self._reason_changes.flush()

    async def _sync(self) -> int:
        self._full = False
        self._changed.clear()  # this pass reads them all; a change from now on is handed over again
        if not self._may_write():
            self._retries.clear()
            for key in list(self._memory):
                self._forget(key)
            self._owners, self._covered = RuntimeOwners(), set()  # not kept current while not leading
            return 0
        if self._throttled():
            self._full = True  # due once the server's wait has passed
            return 0
        self._retries.pass_started(full=True)
        this_pass = self._pass = _Pass()
        for scope in self.scopes:
            if not await self._sync_scope(scope, this_pass):
                return this_pass.writes
        if None in this_pass.unlisted:
            return this_pass.writes
        for key in {*self._memory, *self._retries.keys()} - this_pass.seen:
            if key[0] not in this_pass.unlisted:
                self._forget(key)
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
                self._warn_and_fail_pass(f"cannot list RuntimeScales in {scope or 'all namespaces'}: {error}")
                if self._metrics is not None:  # no status can say it: the bridge sees no RuntimeScale there
                    self._metrics.bridge_runtime_scale_list_failures.inc()
            self._throttle.note(error)
            this_pass.unlisted.add(scope)
            return True
        items = _keyed(listed, scope)
        self._owners.replace(scope, items)
        self._covered.add(scope)
        known = await self._list_targets(scope) if items else _Listed({}, {})
        this_scope = dict(items)
        handed = this_pass.handed
        for key, scale in items:
            this_pass.seen.add(key)
            if self._changed and self._may_write() and not self._throttled():
                between = await self._between(this_scope, handed)
                if between is None:
                    return False
                this_pass.writes += between
            memory = self._memory.get(key)
            if ((key in handed and not older_generation(generation(handed[key]), generation(scale)))
                    or (memory is not None and memory.reconciled_newer_than(scale))):
                continue  # reconciled from its hand-over during this pass: the listed spec is no newer
            if self._retries.waits(key):
                continue
            if not self._may_write():
                return False
            if self._throttled():  # the rest waits with it; nothing it held is forgotten
                self._full = True
                return False
            this_pass.writes += await self._reconcile_guarded(key, scale, known)
        return True

    async def _list_targets(self, scope: str | None) -> _Listed:
        """The ServingRuntimes and ModelMesh Deployments of `scope`, each by (namespace, name); a list that fails
        (say, a ClusterRole from before `list` on ServingRuntimes) leaves its objects to be read one by one."""
        try:
            runtimes: Objects | None = _by_name(await self._client.list_custom(SERVING_RUNTIMES, scope))
        except KubeApiError as error:
            self._warn_and_fail_pass(f"cannot list ServingRuntimes in {scope or 'all namespaces'}, reading them one "
                                     f"by one: {error}")
            self._throttle.note(error)
            runtimes = None
        try:
            deployments: Objects | None = _by_name(
                await self._client.list_deployments(scope, MODELMESH_DEPLOYMENTS))
        except KubeApiError as error:
            self._warn_and_fail_pass(f"cannot list Deployments in {scope or 'all namespaces'}, reading them one by "
                                     f"one: {error}")
            self._throttle.note(error)
            deployments = None
        return _Listed(runtimes, deployments)

    def _remember(self, key: ScaleId) -> ScaleMemory:
        """The RuntimeScale's memory, a new one where it has none."""
        memory = self._memory.get(key)
        if memory is None:
            memory = self._memory[key] = ScaleMemory()
        return memory

    def _forget(self, key: ScaleId) -> None:
        self._memory.pop(key, None)
        if self._metrics is not None:
            self._metrics.forget_runtime_scale(*key)

    async def _patch(self, write: str, resource: CustomResource, namespace: str, name: str, patch: JSON,
                     subresource: str | None = None) -> JSON:
        """One merge patch, counted by what it writes and how it ended; none once this replica stopped leading
        (`NotLeading`): one reconcile makes up to three writes, and the Lease's safety margin covers one call
        in flight at the renew deadline, not the ones after it."""
        if not self._may_write():
            raise NotLeading(f"{resource.plural} {namespace}/{name} not written: this replica stopped leading")
        try:
            result = await self._client.merge_patch_custom(resource, namespace, name, patch, subresource=subresource)
        except KubeApiError as error:
            if self._metrics is not None:
                self._metrics.bridge_writes.labels(write, "retried" if error.retryable else "failed").inc()
            self._throttle.note(error)
            raise
        if self._metrics is not None:
            self._metrics.bridge_writes.labels(write, "ok").inc()
        version = (result.get("metadata") or {}).get("resourceVersion")
        if resource is RUNTIME_SCALES and isinstance(version, str):
            self._remember((namespace, name)).written = version
        return result

    async def _reconcile_guarded(self, key: ScaleId, scale: JSON, known: _Listed | None) -> int:
        try:
            writes = await self._reconcile(key, scale, known)
        except NotLeading:
            log.debug("replica bridge: RuntimeScale %s/%s: stopped leading mid-reconcile", *key)
            return 0  # the next leader's first pass reconciles it
        except KubeApiError as error:
            self._failed(key, error)
            return 0
        self._retries.forget(key)
        return writes

    async def _reconcile(self, key: ScaleId, scale: JSON, known: _Listed | None) -> int:
        """`known`: the full pass's lists (None: read the ServingRuntime and Deployment now)."""
        namespace = key[0]
        runtime_name = (scale.get("spec") or {}).get("servingRuntime")
        owner = self._owners.owner((namespace, runtime_name)) if isinstance(runtime_name, str) else None
        if owner is not None and owner != key:
            return await self._refuse_duplicate(key, scale, owner, known)
        runtime = deployment = None
        cluster_runtime = False
        if isinstance(runtime_name, str) and runtime_name:
            if known is not None and known.runtimes is not None:
                runtime = known.runtimes.get((namespace, runtime_name))
            else:
                try:
                    runtime = await self._client.get_custom(SERVING_RUNTIMES, namespace, runtime_name)
                except KubeApiError as error:
                    await self._report_not_read(key, scale, known, error)
                    raise
            if runtime is None:
                cluster_runtime = await self._cluster_runtime_exists(runtime_name)
            else:
                deployment = await self._deployment(key, scale, known)
        writes = 0
        if runtime is not None:
            self._note_misplaced(key, runtime, deployment, deployment_name(scale))
            if autoscaler_class(runtime) is None:
                scale, writes = await self._carry_replicas(key, scale, runtime, deployment)
        outcome = verdict(scale, runtime, deployment, cluster_runtime=cluster_runtime)
        return writes + await self._write_status(key, scale, deployment, outcome)

    async def _carry_replicas(self, key: ScaleId, scale: JSON, runtime: JSON,
                              deployment: JSON | None) -> tuple[JSON, int]:
        """Carry the RuntimeScale's `spec.replicas` to its ServingRuntime `runtime` (first adopting the runtime's
        replicas where the RuntimeScale has none); returns the RuntimeScale afterwards and the writes made."""
        namespace, name = key
        runtime_name = str((scale.get("spec") or {}).get("servingRuntime"))
        memory = self._remember(key)
        writes = 0
        wanted = replicas_of(scale)
        if wanted is None:
            adopted = replicas_of(runtime)
            if adopted is None and replicas_of(deployment) != 0:
                # A Deployment at 0 is modelmesh-serving's scale to zero, not the runtime's size: adopted
                # and carried back, 0 would keep the runtime at 0 once an InferenceService comes.
                adopted = replicas_of(deployment)
            if adopted is not None:
                scale, writes = await self._adopt(key, scale, adopted)
                wanted = replicas_of(scale)
        memory.note_reconciled(scale)
        found = replicas_of(runtime)
        if wanted is not None and found != wanted:
            try:
                await self._patch("servingruntime_replicas", SERVING_RUNTIMES, namespace, runtime_name,
                                  {"spec": {"replicas": wanted}})
            except KubeApiError as error:
                await self._report_not_written(key, scale, deployment, found, error)
                raise
            writes += 1
            uid = _uid(runtime)
            if (memory.carried == (runtime_name, wanted) and memory.carried_uid is not None
                    and memory.carried_uid != uid):
                log.info("ServingRuntime %s/%s was deleted and created again (a new object, with spec.replicas %s): "
                         "set to %d, what RuntimeScale %s/%s asks (its HPA decides the runtime's replicas)",
                         namespace, runtime_name, shown_replicas(found), wanted, namespace, name)
            elif (memory.carried if memory.carried is not None else bridged_spec(scale)) == (runtime_name, wanted):
                log.log(
                    memory.set_back_level(found, self._clock()),
                    "ServingRuntime %s/%s spec.replicas was set to %s outside RuntimeScale %s/%s (by hand, or by "
                    "a tool that applies the ServingRuntime's manifest); set back to %d: the RuntimeScale, which "
                    "its HPA scales, decides the runtime's replicas. Change the HPA's minReplicas/maxReplicas "
                    "instead, and leave spec.replicas out of applied ServingRuntime manifests",
                    namespace, runtime_name, found, namespace, name, wanted)
            else:
                self._writes.carried(key, runtime_name, found, wanted)
        if wanted is None:
            memory.carried = memory.carried_uid = None
        else:
            memory.carried = (runtime_name, wanted)
            if (uid := _uid(runtime)) is not None:
                memory.carried_uid = uid
        return scale, writes

    async def _refuse_duplicate(self, key: ScaleId, scale: JSON, owner: ScaleId, known: _Listed | None) -> int:
        """A RuntimeScale whose runtime an older one owns: nothing is written to the runtime or adopted from it;
        its status says which RuntimeScale owns the runtime, and its `status.replicas` still mirrors the
        Deployment (what `kubectl get runtimescale` shows is what runs), but it has no `status.selector`: the HPA
        controller stops every HPA whose pods two scales select, the owner's too. Logged once, as its Ready
        reason changes."""
        self._remember(key).forget_carried()
        deployment = await self._deployment(key, scale, known)
        claim = self._owners.claim(owner)
        outcome = duplicate(scale, owner[1], "" if claim is None else claim.created)
        return await self._write_status(key, scale, deployment, outcome, selects_pods=False)

    async def _deployment(self, key: ScaleId, scale: JSON, known: _Listed | None) -> JSON | None:
        """The runtime's Deployment: from the full pass's list, else read now (not listed: a pass for one
        RuntimeScale, or a Deployment without the labels modelmesh-serving gives its own)."""
        listed = None if known is None or known.deployments is None else known.deployments.get(
            (key[0], deployment_name(scale)))
        return listed if listed is not None else await self._client.get_deployment(key[0], deployment_name(scale))

    async def _adopt(self, key: ScaleId, scale: JSON, adopted: int) -> tuple[JSON, int]:
        """Write `adopted` (the runtime's replicas) into the `spec.replicas` the RuntimeScale lacks; returns the
        RuntimeScale afterwards and the writes made.

        Only into the version that was read without replicas (its resourceVersion is the patch's precondition):
        a list or watch event can be older than a value the HPA, KEDA or a user has set since (a new leader's
        late event, a leader that has just lost its Lease), and adopting over it replaced their decision with
        the runtime's old size. On a conflict the RuntimeScale is read again: replicas set meanwhile are kept,
        and a RuntimeScale that still has none (only its metadata changed) is adopted into that version."""
        try:
            return await self._write_adopted(key, scale, adopted), 1
        except KubeApiError as error:
            if error.status != 409:
                raise
            fresh = await self._client.get_custom(RUNTIME_SCALES, *key)
            if fresh is None:
                raise
        found = replicas_of(fresh)
        if found is not None:
            log.info("RuntimeScale %s/%s: spec.replicas was set to %d while the adapter adopted the runtime's %d: "
                     "kept", *key, found, adopted)
            return fresh, 0
        return await self._write_adopted(key, fresh, adopted), 1

    async def _write_adopted(self, key: ScaleId, scale: JSON, adopted: int) -> JSON:
        """The adoption's merge patch, conditional on `scale`'s resourceVersion (409 when it changed since)."""
        patch: JSON = {"spec": {"replicas": adopted}}
        version = (scale.get("metadata") or {}).get("resourceVersion")
        if isinstance(version, str) and version:
            patch["metadata"] = {"resourceVersion": version}
        result = await self._patch("runtimescale_replicas", RUNTIME_SCALES, *key, patch)
        self._writes.adopted(key, adopted)
        return result

    async def _write_status(self, key: ScaleId, scale: JSON, deployment: JSON | None, outcome: Verdict, *,
                            selects_pods: bool = True) -> int:
        """Note `outcome` (log, Ready gauge) and write the status it gives when it differs; returns the writes.
        `selects_pods` False: no `status.selector` (`desired_status`)."""
        namespace, name = key
        memory = self._remember(key)
        if memory.reason != outcome.reason:
            self._reason_changes.changed(key, outcome)
            memory.reason = outcome.reason
        if self._metrics is not None:
            self._metrics.set_runtime_scale_ready(namespace, name, outcome.ready, outcome.reason)
        status = desired_status(scale, deployment, outcome, rfc3339(time.time()), selects_pods=selects_pods)
        old = scale.get("status") or {}
        if {field: old.get(field) for field in status} != status:
            await self._patch("runtimescale_status", RUNTIME_SCALES, namespace, name, {"status": status},
                              subresource="status")
            return 1
        return 0

    async def _report_not_written(self, key: ScaleId, scale: JSON, deployment: JSON | None, found: int | None,
                                  error: KubeApiError) -> None:
        """The runtime does not follow the RuntimeScale: say so in its status, at once when the write is refused
        (403: RBAC, waits for the resync), from the second failure in a row when it is retried (one 409 or 503
        retried a second later would flap Ready). Best effort: the write's own failure is what is retried.

        Also while a 429's `Retry-After` holds the bridge (this write's own 429 set it): skipping the status then
        left a runtime throttled pass after pass `Bridged` for good. It is one write per hold, the pass stops
        here."""
        if self._retries.first_retried(key, error):
            return
        outcome = not_written(scale, found, error, forbidden=error.status == 403, retried=error.retryable,
                              resync_s=self.settings.resync_interval_s)
        with contextlib.suppress(KubeApiError):
            await self._write_status(key, scale, deployment, outcome)

    async def _report_not_read(self, key: ScaleId, scale: JSON, known: _Listed | None, error: KubeApiError) -> None:
        """The ServingRuntime could not be read, so nothing is written to it: say so in the status, when
        `_report_not_written` would (at once for a refusal, from the second failure in a row for one retried).
        Without it the last verdict stayed, `Bridged` and its gauge at 1, while the HPA's replicas reached
        nothing: a ClusterRole without get/list on ServingRuntimes fired no alert. Best effort, as there: the
        read's own failure is what is retried (and where the Deployment cannot be read either, nothing is said)."""
        if self._retries.first_retried(key, error):
            return
        outcome = not_read(scale, error, forbidden=error.status == 403, retried=error.retryable,
                           resync_s=self.settings.resync_interval_s)
        with contextlib.suppress(KubeApiError):  # the Deployment: the status's replicas and selector, still read
            await self._write_status(key, scale, await self._deployment(key, scale, known), outcome)

    def _note_misplaced(self, key: ScaleId, runtime: JSON, deployment: JSON | None, deployment_called: str) -> None:
        """Warn once per change when the ServingRuntime, the object users edit, carries policy annotations its
        Deployment does not: the adapter reads the Deployment's only, and the user believes they apply."""
        memory = self._remember(key)
        misplaced = tuple(sorted(misplaced_policy_annotations(runtime, deployment).items()))
        if misplaced and memory.misplaced != misplaced:
            meta = runtime.get("metadata") or {}
            written = ", ".join(f"{name}={value!r}" for name, value in misplaced)
            log.warning("ServingRuntime %s/%s has %s, which the adapter does not read: policy annotations apply "
                        "on the runtime's Deployment %s/%s (annotate it, where your modelmesh-serving controller "
                        "keeps its annotations) or in a runtimes: entry of the policy file",
                        meta.get("namespace") or key[0], meta.get("name"), written, key[0], deployment_called)
        memory.misplaced = misplaced

    async def _cluster_runtime_exists(self, name: str) -> bool:
        try:
            return await self._client.get_custom(CLUSTER_SERVING_RUNTIMES, None, name) is not None
        except KubeApiError as error:
            if error.status in (403, 404):  # not allowed to look, or the CRD is not installed: say "not found"
                return False
            raise

    def _failed(self, key: ScaleId, error: KubeApiError) -> None:
        """Schedule the RuntimeScale's retry (`bridge_retries`) and say why it failed."""
        wait = self._retries.failed(key, error)
        self._warn_and_fail_pass(f"RuntimeScale {key[0]}/{key[1]} not reconciled (next try in {wait:.0f} s): "
                                 f"{error}", kind=str(error.status))

    def _throttled(self) -> bool:
        return self._throttle.remaining() > 0

    def _warn_and_fail_pass(self, message: str, kind: str | None = None) -> None:
        """Say a failure, at WARNING the first time its cause (`kind`, else the message) is met since the last
        pass that failed nowhere, and mark the pass failed, which keeps the causes warned about until then."""
        cause = kind or message
        level = logging.WARNING if cause not in self._warned else logging.DEBUG
        self._warned.add(cause)
        self._pass.failed = True
        log.log(level, "replica bridge: %s", message)

    def next_pass_in_s(self) -> float:
        """Seconds until the next full pass (`run` waits that long for a watch event): the server's `Retry-After`,
        the resync or the next retry due (`RetrySchedule.next_pass_in_s`)."""
        return self._retries.next_pass_in_s()


def _uid(obj: JSON) -> str | None:
    """The object's `metadata.uid`, which a deleted and created again object does not keep."""
    uid = (obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else None


def _keyed(listed: JSON, scope: str | None) -> list[tuple[ScaleId, JSON]]:
    """A list's RuntimeScales with their (namespace, name)."""
    return [(object_key(scale, scope), scale) for scale in listed.get("items") or [] if isinstance(scale, dict)]


def _by_name(listed: JSON) -> Objects:
    """A list's items by (namespace, name)."""
    return {object_key(item): item for item in listed.get("items") or [] if isinstance(item, dict)}


