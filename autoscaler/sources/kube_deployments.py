"""`DeploymentResync`: pod discovery's runtime table, re-read from the runtimes' Deployments on a timer.

A runtime is a Deployment (docs/design.md). The table holds the configured runtimes (always, even before or
without their Deployment) and, when discovering, every Deployment with the runtime label in the watched
namespaces, each with its `spec.replicas`, policy annotations and pod selector. Deployments change rarely
and carry no load, so they are re-read every resync interval instead of watched. Each namespace's runtimes are
replaced only when every read of that namespace worked; while one fails they stay as last read, the namespace is
in `failing` with the API's error, and `ok_for` it is False (docs/design.md, Missing data). One tenant's namespace
refused (a RoleBinding missing, the namespace being deleted) so keeps no other namespace's runtimes out of date;
a read of all namespaces that fails is every namespace's.

One change cannot wait for the resync: modelmesh-serving scaling a runtime to zero or back, which its pods show
first. `reread(key)` asks for that one Deployment to be read again soon (`run_rereads`): a GET by name, with
the requests coalesced (a runtime asked for twice is read once) and rate-limited (at most `_REREAD_BATCH`
Deployments per `reread_interval_s`, so one runtime at most once per interval), so pod churn cannot become
API load. A targeted read and the full resync may overlap: each record remembers when the read that produced
it started, and a later-started read wins, so neither puts back what the other already read as older.

Nor can a runtime that appears: when discovering, pods of a runtime the table does not hold (a runtime applied
again after a delete, as GitOps tools replace one, or a new one) ask for it by name (`discover_soon`), read as
a list of the one name under the discovery label selector (`kube_deployment_reads`: how each Deployment is read),
so that the API server, not this module, decides whether that Deployment is a runtime. Before, it answered 404
until the resync (30 s by default).

Logs go to pod discovery's logger (`autoscaler.sources.kube_pods`), the one operators filter on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence

from kubernetes.aio.client import ApiClient

from autoscaler.kube.backoff import FailuresInARow, unanswered
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import Scope, scope_name
from autoscaler.kube.retry_guard import RetryGuard
from autoscaler.kube.watch_health import LoopHealth, Watched, WatchHealth
from autoscaler.log_lists import added_and_removed
from autoscaler.model import RuntimeKey
from autoscaler.source_problems import HPA_HOLDS
from autoscaler.sources.kube_deployment_reads import DeploymentReads
from autoscaler.sources.kube_objects import (
    RuntimeRecord,
    fallback_selector,
    runtime_table,
)
from autoscaler.sources.reread_news import HELD, RereadNews

log = logging.getLogger("autoscaler.sources.kube_pods")

_REREAD_BATCH = 8
"""Deployments read by name per `reread_interval_s` at most: 4 GETs a second at the 2 s default, whatever the
pod churn; a burst beyond waits (the periodic resync still reads everything on its own timer)."""


class DeploymentResync:
    """Keeps `runtimes` from the Kubernetes Deployments, re-reading them every `resync_interval_s` (`run`)."""

    def __init__(
        self,
        client: Callable[[], ApiClient],
        *,
        static: Sequence[RuntimeKey],
        discover: bool,
        namespaces: Sequence[str] | None,
        label_selector: str,
        resync_interval_s: float,
        request_timeout_s: float,
        backoff: Callable[[int], float],
        on_change: Callable[[], None],
        reread_interval_s: float = 2.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        health: WatchHealth | None = None,
        unanswered_backoff: Callable[[int], float] | None = None,
    ) -> None:
        """`client` returns the started API client (it raises `KubeApiError` when there is none).

        `static` runtimes are read by name; with `discover`, Deployments labelled `label_selector` are listed
        in `namespaces` (None: all namespaces). `request_timeout_s` bounds each read; after a failure the next
        try comes after `backoff(n)` for the n-th answered failure in a row (`backoff.FailuresInARow`: an outage's
        refusals before it do not count), never later than `resync_interval_s`.
        `on_change()` is called whenever `runtimes` changed. `reread_interval_s` paces the reads by name that
        `reread` asks for. `sleep` waits between reads (tests record the waits instead). `health` counts each
        namespace's failed resync by its cause (the adapter's metrics; the reads by name are left to the resync).
        `unanswered_backoff(n)`, where given, replaces `backoff(n)` after a resync whose every failure the API
        server never answered, n counting every failure in a row (`autoscaler.kube.backoff.UNANSWERED_MAX_S`): back
        within seconds of its return.
        """
        self._client = client
        self._static = tuple(static)
        self._discover = discover
        self._namespaces = namespaces
        self._resync_interval_s = resync_interval_s
        self.deployments = DeploymentReads(label_selector=label_selector, request_timeout_s=request_timeout_s)
        """How each Deployment is read (`kube_deployment_reads`)."""
        self._guard = RetryGuard(backoff, log=log, name="Kubernetes discovery: the resync of runtime Deployments")
        """The backoff cannot end the resync loop (`autoscaler.kube.retry_guard`)."""
        self._unanswered = None if unanswered_backoff is None else RetryGuard(
            unanswered_backoff, log=log, name="Kubernetes discovery: the resync of runtime Deployments")
        self._on_change = on_change
        self._sleep = sleep
        self._health = None if health is None else LoopHealth(health, Watched.DEPLOYMENTS)
        self.runtimes: dict[RuntimeKey, RuntimeRecord] = {
            key: RuntimeRecord(key, fallback_selector(key)) for key in self._static
        }
        self.tried = False
        """Whether a resync has been tried since start (`reset`): before, nothing is known of any namespace."""
        self.failing: dict[Scope, str] = {}
        """What the last resync failed with, by namespace (None: a read of all namespaces, or no client), for
        /debug, which shows an error only to runtimes of its namespace: another namespace's name and API error
        are no tenant's business."""
        self._reread_interval_s = reread_interval_s
        self._pending: dict[RuntimeKey, None] = {}  # runtimes to read by name, in the order asked
        self._wake = asyncio.Event()
        self._reads = 0  # reads started so far: orders a targeted read against the full resync
        self._table_read = 0  # the start number of the full resync that made `runtimes`
        self._newer: dict[RuntimeKey, int] = {}  # runtimes read by name after that, with their start number
        self._news = RereadNews()  # what those reads found, said together (`run_rereads`)
        self._pods_gone: dict[RuntimeKey, int] = {}  # runtimes whose pods went against their replicas: reads by then

    @property
    def ok(self) -> bool:
        """False until the first read, and while reading any namespace's Deployments fails."""
        return self.tried and not self.failing

    def ok_for(self, namespace: Scope) -> bool:
        """Whether `namespace`'s runtimes are as the last resync read them: read, neither it nor all failing.
        None: the read of all namespaces, whatever one namespace's read by name (a policy-file runtime's) says."""
        return self.tried and None not in self.failing and namespace not in self.failing

    def reset(self) -> None:
        """Forget what is known of the reads: discovery starts again, and nothing is read until the first."""
        self.tried = False
        self.failing = {}

    @property
    def pods_gone(self) -> frozenset[RuntimeKey]:
        """Runtimes whose live pods all went while their replicas say otherwise, not read since: deleted or scaled
        to zero, most likely, and the read that says which may wait its turn (`_REREAD_BATCH`) for seconds. Pod
        discovery shows them as being deleted meanwhile: as runtimes with replicas and no pods, a refresh said
        each a 503 "no ready pods" with a WARNING and a `runtime_values_known 0` series."""
        return frozenset(self._pods_gone)

    def reread(self, key: RuntimeKey, *, pods_gone: bool = False) -> None:
        """Ask for runtime `key`'s Deployment to be read again soon; O(1), never blocks, asking twice is once.
        `pods_gone`: its live pods all went (`pods_gone`) until a read started from now answers."""
        if key in self.runtimes and pods_gone:
            self._pods_gone[key] = self._reads
        if key in self.runtimes and key not in self._pending:
            self._pending[key] = None
            self._wake.set()

    def pods_back(self, key: RuntimeKey) -> None:
        """Runtime `key` has live pods again: no longer `pods_gone`."""
        if self._pods_gone.pop(key, None) is not None:
            self._on_change()

    def discover_soon(self, key: RuntimeKey) -> None:
        """Ask for Deployment `key`, which the table does not hold but whose pods appeared, to be looked for among
        the Deployments discovery lists, soon (paced as `reread`); nothing unless discovering in its namespace."""
        watched = self._namespaces is None or key.namespace in self._namespaces
        if self._discover and watched and key not in self.runtimes and key not in self._pending:
            self._pending[key] = None
            self._wake.set()

    async def run_rereads(self) -> None:
        """Read the Deployments `reread` asked for, at most `_REREAD_BATCH` per `reread_interval_s`, forever.
        What the reads find is said once none is queued after a read interval (`reread_news`): runtimes that
        come or go together are one line."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                batch = list(itertools.islice(self._pending, _REREAD_BATCH))
                for key in batch:
                    del self._pending[key]
                for outcome in await asyncio.gather(*(self._reread_one(key) for key in batch),
                                                    return_exceptions=True):
                    if isinstance(outcome, Exception):  # a bug, not the API (those are left to the resync): say so
                        log.error("Kubernetes discovery: unexpected error re-reading a Deployment", exc_info=outcome)
                await asyncio.sleep(self._reread_interval_s)
                if not self._pending or len(self._news) >= HELD:
                    self._news.flush()
                if self._pending:
                    self._wake.set()
        finally:
            self._news.flush()

    async def _reread_one(self, key: RuntimeKey) -> None:
        """Read one Deployment by name and put it in the table, unless a later-started read is there already.
        A failure is left to the periodic resync (which owns `ok`)."""
        self._reads += 1
        started = self._reads
        looked_for = key not in self.runtimes  # asked for by `discover_soon`
        try:
            api = self._client()
            if key in self._static:
                record: RuntimeRecord | None = await self.deployments.read_deployment(api, key)
            elif looked_for:
                record = await self.deployments.find_discovered(api, key)
            else:
                record = await self.deployments.read_discovered(api, key)
        except Exception as error:
            log.debug("Kubernetes discovery: re-reading Deployment %s failed (left to the resync): %s", key, error)
            return
        if self._pods_gone.get(key, started) < started:  # read since its pods went: what it is now is known
            del self._pods_gone[key]
            self._on_change()
        current = self.runtimes.get(key)
        if started < max(self._table_read, self._newer.get(key, 0)):
            return
        if current is None:
            if looked_for and record is not None:
                self._newer[key] = started
                self.runtimes[key] = record
                self._news.added(key)
                self._on_change()
            return
        self._newer[key] = started
        if record is None:  # a discovered runtime's Deployment deleted: gone now, not at the resync
            del self.runtimes[key]
            self._news.removed(key)
            self._on_change()
            return
        if runtime_table({key: record}) != runtime_table({key: current}):
            if record.replicas != current.replicas:
                self._news.rescaled(key, current.replicas, record.replicas)
            self.runtimes[key] = record
            self._on_change()

    async def run(self, first_attempt: asyncio.Event) -> None:
        """Re-read Deployments every `resync_interval_s`; sooner, with backoff, after a failure.

        `first_attempt` is set once the first read has succeeded or failed."""
        in_a_row = FailuresInARow()
        if self._health is not None:
            self._health.started(None)
        while True:
            try:
                errors = await self._refresh()
            except Exception as error:  # no client: every namespace
                errors = {None: error}
            n = in_a_row.failed(*errors.values()) if errors else 0
            self._note_failing(errors, in_a_row.failures)
            if errors:
                # Never sooner than the server's Retry-After (a 429 from API Priority and Fairness), never later
                # than the resync.
                retry_after = max((error.retry_after_s or 0.0 for error in errors.values()
                                   if isinstance(error, KubeApiError)), default=0.0)
                guard = self._guard
                if self._unanswered is not None and all(map(unanswered, errors.values())):
                    guard = self._unanswered  # the API server never answered: trying again costs it nothing
                delay = min(guard.wait(n, retry_after), self._resync_interval_s)
            else:
                in_a_row.reset()
                delay = self._resync_interval_s
            first_attempt.set()
            await self._sleep(delay)

    def _note_failing(self, errors: dict[Scope, Exception], failures: int) -> None:
        """Record each namespace's failed read, logging a namespace once when it starts failing and when it is
        readable again; an error of the adapter's own (not the API's) once a failing spell of that namespace,
        with its traceback (`RetryGuard.unexpected`: it was a traceback at every retry)."""
        for scope, error in errors.items():
            if self._health is not None:
                self._health.failed(error)
            if not isinstance(error, KubeApiError):
                self._guard.unexpected(error, failures, where=f"in {scope_name(scope)}")
            elif scope not in self.failing:
                log.warning("Kubernetes discovery: cannot read runtime Deployments in %s, keeping its runtimes as "
                            "last read; they are unknown (503) until it recovers, the HPA %s: %s", scope_name(scope),
                            HPA_HOLDS, error)
        for scope in self.failing.keys() - errors.keys():
            log.info("Kubernetes discovery: runtime Deployments in %s readable again", scope_name(scope))
            self._guard.works(failures, where=f"in {scope_name(scope)}")
        self.failing = {scope: f"cannot read runtime Deployments: {error}" for scope, error in errors.items()}
        self.tried = True

    async def _refresh(self) -> dict[Scope, Exception]:
        """Read every runtime's Deployment; replace a namespace's runtimes only when every read of it worked
        (all of them, when a read of all namespaces failed). Returns the failures by namespace."""
        api = self._client()
        self._reads += 1
        started = self._reads
        fresh: dict[RuntimeKey, RuntimeRecord] = {}
        errors: dict[Scope, Exception] = {}
        reads = [self.deployments.read_deployment(api, key) for key in self._static]
        for key, outcome in zip(self._static, await asyncio.gather(*reads, return_exceptions=True), strict=True):
            if isinstance(outcome, Exception):
                errors.setdefault(key.namespace, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                fresh[outcome.key] = outcome
        if self._discover:
            for namespace in self._namespaces if self._namespaces is not None else (None,):
                try:
                    listed = await self.deployments.list_deployments(api, namespace)
                except Exception as error:
                    errors.setdefault(namespace, error)
                    continue
                for runtime in listed:
                    fresh.setdefault(runtime.key, runtime)
        if None in errors:
            return errors
        if errors:  # the failing namespaces' runtimes as last read
            fresh = {key: record for key, record in fresh.items() if key.namespace not in errors}
            fresh.update((key, record) for key, record in self.runtimes.items() if key.namespace in errors)
        # A runtime read by name after this resync started is newer than what this resync read of it (or found
        # its Deployment gone), or found a runtime this resync listed too early to see.
        newer = {key: at for key, at in self._newer.items() if at > started}
        for key in newer:
            if key in self.runtimes:
                fresh[key] = self.runtimes[key]
            else:
                fresh.pop(key, None)
        self._table_read, self._newer = started, newer
        known = {key for key, asked in self._pods_gone.items() if asked < started and key.namespace not in errors}
        for key in known:
            del self._pods_gone[key]
        if known:
            self._on_change()
        if runtime_table(fresh) != runtime_table(self.runtimes):
            added = sorted(str(key) for key in fresh.keys() - self.runtimes.keys())
            removed = sorted(str(key) for key in self.runtimes.keys() - fresh.keys())
            if added or removed:
                log.info("Kubernetes discovery: %s", added_and_removed("runtime", added, removed))
            self.runtimes = fresh
            self._on_change()
        return errors
