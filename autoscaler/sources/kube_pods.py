"""Pod discovery from the Kubernetes API: which ModelMesh runtimes exist, and where their pods' exporters answer.

A runtime is a Deployment (docs/design.md). Runtimes come from the configuration (`RuntimeKey`s given at
construction) and, when asked, from Deployments labelled `modelmesh-service` in all namespaces or a namespace
list. This module puts the parts together behind the `PodDiscovery` interface:

- `kube_deployments.DeploymentResync` re-reads the Deployments every `resync_interval_s` for `spec.replicas`,
  the policy annotations and the pod selector;
- `kube_watch.PodWatch` tracks pods with list + watch: one per namespace, or one for all namespaces. When a
  runtime's live pods go to none while its replicas is not 0, or appear while it is 0 (modelmesh-serving
  scaled it to zero or back), that one Deployment is read again within `reread_interval_s`, not at the next
  resync: else the adapter would warn "no ready pods" and count misses for up to `resync_interval_s` before
  it says "scaled to zero", and seed a runtime back from zero at 0 replicas. Until that read answers, the
  runtime is shown being deleted (`DeploymentResync.pods_gone`), not as one with replicas and no pods;
- `kube_objects` reads pods and Deployments from the API's JSON and joins them into the inventory.

While a namespace's pod watch or Deployment read is broken `healthy_for` that namespace is False: its part of
the inventory is kept as last seen, and the metric source marks its runtimes' snapshots `source_ok=False`, so
nothing is lowered on stale knowledge (docs/design.md). Only its runtimes: one tenant's namespace refused (a
RoleBinding missing) holds no other namespace's; a watch or read of all namespaces that fails holds every runtime.

The client is `kubernetes.aio` (native asyncio: cancellable, no thread per watch), configured from a kubeconfig
or the in-cluster service account by `load_configuration`; responses are read as raw JSON (`autoscaler.kube.raw`).

Errors: every failure of the library or the API surfaces as `KubeApiError` (`autoscaler.kube.errors`,
re-exported here with its subclass `WatchExpiredError`). The background loops catch
them and keep going (an unexpected exception is logged with its traceback and retried too: discovery must
not stop silently). `load_configuration()` and `start()` raise `KubeApiError` only for a client that
cannot be configured or created; `inventory()` and `close()` never raise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from os import PathLike
from typing import Final

from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.kube.backoff import UNANSWERED_MAX_S, spread_delay
from autoscaler.kube.config import load_kube_settings
from autoscaler.kube.errors import KubeApiError, KubeConfigError, WatchExpiredError
from autoscaler.kube.raw import Scope
from autoscaler.kube.session import ClientFactory, KubeSession
from autoscaler.kube.user_agent import user_agent
from autoscaler.kube.watch_health import WatchHealth
from autoscaler.model import RuntimeKey
from autoscaler.names import MODELMESH_SERVICE_LABEL
from autoscaler.sources.base import ALL_NAMESPACES, RuntimeInventory
from autoscaler.sources.forced_scheme import ForcedSchemeWarning
from autoscaler.sources.kube_deployments import DeploymentResync
from autoscaler.sources.kube_objects import (
    MODELMESH_NAME_LABEL,
    build_inventory,
    fallback_selector,
)
from autoscaler.sources.kube_watch import PodWatch

__all__ = [
    "DEFAULT_EXPORTER_PORT",
    "MODELMESH_NAME_LABEL",
    "MODELMESH_SERVICE_LABEL",
    "ClientFactory",
    "KubeApiError",
    "KubePodDiscovery",
    "WatchExpiredError",
    "kube_configuration",
    "load_configuration",
]

log = logging.getLogger(__name__)

DEFAULT_EXPORTER_PORT: Final = 9187


async def load_configuration(
    kubeconfig: str | PathLike[str] | None = None, context: str | None = None
) -> Configuration:
    """The shared connection settings (`autoscaler.kube.config`); a missing or broken config is a
    `KubeApiError`, so discovery's callers handle one error type."""
    try:
        return (await load_kube_settings(kubeconfig, context)).configuration
    except KubeConfigError as error:
        raise KubeApiError(f"pod discovery: {error}") from error


def kube_configuration(kubeconfig: str | PathLike[str] | None = None, context: str | None = None, *,
                       part: str = "discovery") -> ClientFactory:
    """What to connect with, for `KubePodDiscovery(kube_configuration(path))`: a factory that loads the kubeconfig
    (or the in-cluster settings when `kubeconfig` is None) when discovery starts, so building the app stays
    synchronous and a broken config surfaces from `start()` as a `KubeApiError`. Its requests name the adapter
    and `part` in their User-Agent (`autoscaler.kube.user_agent`)."""

    async def create() -> ApiClient:
        client = ApiClient(await load_configuration(kubeconfig, context))
        client.user_agent = user_agent(part)
        return client

    return create


class KubePodDiscovery:
    """Keeps the inventory of ModelMesh runtimes and their pods from the Kubernetes API (`PodDiscovery`)."""

    def __init__(
        self,
        client: Configuration | ClientFactory,
        *,
        runtimes: Iterable[RuntimeKey] = (),
        discover: bool = True,
        namespaces: Sequence[str] | None = None,
        exporter_port: int = DEFAULT_EXPORTER_PORT,
        exporter_scheme: str = "auto",
        resync_interval_s: float = 30.0,
        reread_interval_s: float = 2.0,
        request_timeout_s: float = 10.0,
        watch_timeout_s: int = 60,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        start_timeout_s: float | None = None,
        pod_label_selector: str = MODELMESH_SERVICE_LABEL,
        deployment_label_selector: str = MODELMESH_SERVICE_LABEL,
        health: WatchHealth | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Configure discovery; nothing is contacted before `start()`.

        `client` is a `kubernetes.aio` `Configuration`, or a factory of `ApiClient` (sync or async, called once
        per `start()`; `kube_configuration()` makes one from a kubeconfig). The client is closed by `close()`.
        `runtimes` (from the config file) are always served, even before or without their Deployment.
        `discover` adds every Deployment labelled `deployment_label_selector` in `namespaces` (None or empty:
        all namespaces, which needs cluster-wide list/watch RBAC on pods and deployments).

        `request_timeout_s` bounds every list and get: the library's default is 5 minutes, far longer than a
        refresh. `watch_timeout_s` is the server-side `timeoutSeconds` of one watch request, after which the
        stream is resumed from where it was (no re-list). It also bounds how long a silently dead connection
        (no RST) keeps `healthy` True: about `watch_timeout_s + request_timeout_s`. One reconnect a minute per
        namespace is nothing for the API server. `start_timeout_s` bounds how long `start()` waits for the
        first list (default: twice the request timeout). `reread_interval_s` paces the reads of one Deployment
        that a runtime's pods going to none or back ask for (`DeploymentResync.reread`).

        Health is per namespace (`healthy_for`, the `PodDiscovery` contract): a namespace whose pods cannot be
        watched (RBAC) keeps its own runtimes' snapshots `source_ok=False`, not the other namespaces'.
        `health` counts the pod watches' and the Deployment resync's failures (the adapter's metrics). `sleep`
        is how the pod watches and the Deployment resync wait between attempts (tests play the waits on a clock
        of their own).
        """
        static = tuple(dict.fromkeys(runtimes))
        if not static and not discover:
            raise ValueError("nothing to discover: give runtimes, or discover=True")
        self._session = KubeSession(_client_factory(client) if isinstance(client, Configuration) else client,
                                    "discovery")
        watched = tuple(dict.fromkeys(namespaces)) if namespaces else None
        self._exporter_port = exporter_port
        self._exporter_scheme = exporter_scheme
        self._forced_scheme = ForcedSchemeWarning(exporter_port, exporter_scheme)
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._start_timeout_s = start_timeout_s if start_timeout_s is not None else 2 * float(request_timeout_s)

        scopes: tuple[Scope, ...]
        if discover and watched is None:
            scopes = (None,)
        else:
            scopes = tuple(sorted({*(watched or ()), *(key.namespace for key in static)}))

        self._deployments = DeploymentResync(
            self._session.client,
            static=static,
            discover=discover,
            namespaces=watched,
            label_selector=deployment_label_selector,
            resync_interval_s=resync_interval_s,
            request_timeout_s=float(request_timeout_s),
            backoff=self._backoff,
            on_change=self._changed,
            reread_interval_s=reread_interval_s,
            sleep=sleep,
            health=health,
            unanswered_backoff=self._unanswered_backoff,
        )
        self._watches = tuple(
            PodWatch(
                scope,
                self._session.client,
                label_selector=pod_label_selector,
                request_timeout_s=float(request_timeout_s),
                watch_timeout_s=int(watch_timeout_s),
                backoff=self._backoff,
                on_change=self._changed,
                on_runtime_pods=self._runtime_pods,
                health=health,
                on_deletion_cost=self._deletion_cost_shown,
                sleep=sleep,
                unanswered_backoff=self._unanswered_backoff,
            )
            for scope in scopes
        )
        self._namespace_watches = {watch.scope: watch for watch in self._watches if watch.scope is not None}
        """The watch of each namespace watched on its own; with none (discovery in all namespaces), the one
        watch of all serves every namespace (`_watch_of`). The deletion-cost writer looks up each pod it writes
        at every pass: one lookup, not one per namespace watched."""
        self._all_namespaces_watch = next((watch for watch in self._watches if watch.scope is None), None)
        self._read_by_name = tuple(sorted({key.namespace for key in static}))
        """The namespaces of the policy file's runtimes, whose Deployments are read by name: with the watch of all
        namespaces, each can fail alone (a 403 or 500 for that namespace) while the rest of the cluster is read."""
        self._cost_listeners: list[Callable[[str, str, str | None], None]] = []
        self._cost_listener_failing = False  # a deletion-cost listener raised, said once until one answers again
        self._version = 0
        self._cache: tuple[int, dict[RuntimeKey, RuntimeInventory]] | None = None

    # ---- PodDiscovery ------------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False until the first list, and while any watch or any namespace's Deployment read is failing."""
        return self._session.running and self._deployments.ok and all(watch.ok for watch in self._watches)

    def healthy_for(self, namespace: str) -> bool:
        """False until the first list, and while the pod watch or Deployment read of `namespace`, or of all
        namespaces, is failing: only then may what is known of its runtimes be out of date. A pod watch dropped
        mid-stream and resumed where it left off misses nothing: failing only once still down
        `watch_ends.DROPPED_GRACE_S` after the drop (`PodWatch.ok`)."""
        return self._current(namespace)

    def scope_health(self) -> dict[str, bool]:
        """Each scope read on its own and whether discovery there is current (`DiscoveryScopes`): each namespace
        watched, as `healthy_for` says; with the watch of all namespaces, `ALL_NAMESPACES` (that watch and the
        list of all Deployments) and each namespace of a policy-file runtime (its Deployment read by name). One
        such read refused set `ALL_NAMESPACES` to 0: the alert named the cluster, not the namespace, and the
        rest of the fleet, read fine, looked unhealthy."""
        if self._all_namespaces_watch is not None:
            return {ALL_NAMESPACES: self._current(None), **{ns: self._current(ns) for ns in self._read_by_name}}
        return {namespace: self.healthy_for(namespace) for namespace in self._namespace_watches}

    def _current(self, scope: Scope) -> bool:
        """Whether the pod watch and the Deployment reads of `scope` (None: all namespaces) work."""
        watch = self._all_namespaces_watch if scope is None else self._watch_of(scope)
        return self._session.running and self._deployments.ok_for(scope) and (watch is None or watch.ok)

    @property
    def problems(self) -> tuple[tuple[str | None, str], ...]:
        """What keeps the inventory out of date, in the Kubernetes API's words: each failing Deployment read's
        error and each failing pod watch's, with the namespace each is about (None: a read of all namespaces);
        () when healthy, or before the first attempt has failed. /debug shows a runtime only its own namespace's."""
        errors = [*self._deployments.failing.items(), *((watch.scope, watch.error) for watch in self._watches)]
        return tuple((namespace, error) for namespace, error in errors if error)

    async def start(self) -> None:
        """Start the watch and resync loops; return after their first attempt (or `start_timeout_s`)."""
        if self._session.running:
            return
        await self._session.open()
        for watch in self._watches:
            watch.ok = False
        self._deployments.reset()
        first_attempts: list[asyncio.Event] = []
        resync_done = asyncio.Event()
        first_attempts.append(resync_done)
        self._session.spawn(self._deployments.run(resync_done), "kube-discovery-deployments")
        self._session.spawn(self._deployments.run_rereads(), "kube-discovery-deployment-rereads")
        for watch in self._watches:
            done = asyncio.Event()
            first_attempts.append(done)
            name = f"kube-discovery-pods-{watch.scope or 'all-namespaces'}"
            self._session.spawn(watch.run(done), name)
        try:
            async with asyncio.timeout(self._start_timeout_s):
                await asyncio.gather(*(event.wait() for event in first_attempts))
        except TimeoutError:
            log.warning("Kubernetes discovery: no first inventory within %.1f s; continuing", self._start_timeout_s)

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        """Runtimes and their pods as last seen; rebuilt only after a change, so calling it is cheap."""
        if self._cache is not None and self._cache[0] == self._version:
            return dict(self._cache[1])
        pods = [pod for watch in self._watches for pod in watch.pods.values()]
        runtimes = self._deployments.runtimes
        if pods_gone := self._deployments.pods_gone & runtimes.keys():  # deleted, most likely: not "no ready pods"
            runtimes = {**runtimes, **{key: replace(runtimes[key], deleting=True) for key in pods_gone}}
        result = build_inventory(runtimes, pods, self._exporter_port, self._exporter_scheme)
        self._forced_scheme.check(pods)
        self._cache = (self._version, result)
        return dict(result)

    def deletion_cost(self, namespace: str, pod: str) -> str | None:
        """The pod's `controller.kubernetes.io/pod-deletion-cost` as last seen in the cluster (None: none, or
        a pod not watched). Read from the deletion-cost writer's planning thread: dict lookups, atomic."""
        watch = self._watch_of(namespace)
        return None if watch is None else watch.deletion_costs.get((namespace, pod))

    def on_deletion_cost(self, listener: Callable[[str, str, str | None], None]) -> None:
        """Call `listener(namespace, pod, annotation)` with each pod each watch lists or shows changed
        (`DeletionCostEvents`): the deletion-cost writer records its writes' echoes as they come."""
        self._cost_listeners.append(listener)

    def pod_selector(self, key: RuntimeKey) -> dict[str, str]:
        """The labels that select the runtime's pods, as its Deployment last read says (ModelMesh's `name` label
        before it is read): for the command that removes the deletion costs left outside `--namespaces`
        (`autoscaler.costs_left_outside`)."""
        record = self._deployments.runtimes.get(key)
        return dict(record.selector) if record is not None else fallback_selector(key)

    def pod_uid(self, namespace: str, pod: str) -> str | None:
        """The `metadata.uid` of the pod of that name as last seen in the cluster (None: a pod not watched),
        for the deletion-cost writer to tell a pod created again under its name from the one it wrote. Read
        from the writer's planning thread: dict lookups, atomic."""
        watch = self._watch_of(namespace)
        record = None if watch is None else watch.pods.get((namespace, pod))
        return None if record is None else record.uid

    async def close(self) -> None:
        """Stop every loop and close the client; safe to call twice."""
        await self._session.close()

    # ---- plumbing ----------------------------------------------------------------------------------------

    def _backoff(self, failures: int) -> float:
        return spread_delay(failures, self._backoff_initial_s, self._backoff_max_s)

    def _unanswered_backoff(self, failures: int) -> float:
        """The wait after failures the API server never answered: as `_backoff`, capped at `UNANSWERED_MAX_S`, so
        that discovery (and the runtimes' values) is back within seconds of an outage's end."""
        return spread_delay(failures, self._backoff_initial_s, min(self._backoff_max_s, UNANSWERED_MAX_S))

    def _watch_of(self, namespace: str) -> PodWatch | None:
        """The watch that sees `namespace`'s pods: its own, else the watch of all namespaces (None: not watched)."""
        return self._namespace_watches.get(namespace, self._all_namespaces_watch)

    def _deletion_cost_shown(self, namespace: str, pod: str, annotation: str | None) -> None:
        """Tell the listeners (the deletion-cost writer's echoes) what the watch shows. A listener that raises is
        logged, once until one answers again, and never stops the watch: raised into it, the event was replayed
        for good and the namespace's pods were never seen again."""
        for listener in self._cost_listeners:
            try:
                listener(namespace, pod, annotation)
            except Exception:
                if not self._cost_listener_failing:
                    log.exception("Kubernetes discovery: the deletion-cost listener failed on pod %s/%s; the pod "
                                  "watch goes on (said once until it answers again)", namespace, pod)
                self._cost_listener_failing = True
            else:
                self._cost_listener_failing = False

    def _changed(self) -> None:
        self._version += 1

    def _runtime_pods(self, namespace: str, deployment: str, present: bool) -> None:
        """A runtime's live pods went to none (`present` False) or up from none: when that contradicts its
        replicas as last read, modelmesh-serving scaled it to zero or back; read its Deployment again soon. Pods
        of a runtime not in the table: look for its Deployment (`DeploymentResync.discover_soon`)."""
        key = RuntimeKey(namespace, deployment)
        record = self._deployments.runtimes.get(key)
        if present:
            self._deployments.pods_back(key)
        if record is None:
            if present:  # a runtime applied again after a delete, or a new one: not at the resync
                self._deployments.discover_soon(key)
        elif (record.replicas == 0) == present:
            self._deployments.reread(key, pods_gone=not present)
            self._changed()


def _client_factory(configuration: Configuration) -> Callable[[], ApiClient]:
    def create() -> ApiClient:
        return ApiClient(configuration)

    return create
