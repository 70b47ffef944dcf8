"""Pod discovery from the Kubernetes API: which ModelMesh runtimes exist, and where their pods' exporters answer.

A runtime is a Deployment (DESIGN §4). Runtimes come from the configuration (`RuntimeKey`s given at
construction) and, when asked, from Deployments labelled `modelmesh-service` in all namespaces or a namespace
list. Every `resync_interval_s` the Deployments are read again for `spec.replicas`, the policy annotations
and the pod selector (`spec.selector.matchLabels`; ModelMesh uses `modelmesh-service` and `name`).

Pods are tracked with list + watch, the way client-go's reflector does it, so an HPA request never waits on
the API and 10,000 pods cost one list and one stream: one watch per namespace (or one cluster-wide watch when
discovering in all namespaces) selecting `modelmesh-service`, never one per pod or per runtime. A watch that
ends is resumed from the last resourceVersion seen; one the server no longer retains (410 Expired, as an ERROR
event or a status) is replaced by a fresh list. Any other failure is retried with capped exponential backoff
and jitter, and while a watch or the Deployment read is broken `healthy` is False: the inventory is kept as
last seen, and the metric source marks its snapshots `source_ok=False`, so nothing is lowered on stale
knowledge (DESIGN §6).

A pod is Ready when its `Ready` condition is True and it is not terminating (no `deletionTimestamp`): the
ReplicaSet counts a terminating pod as gone, so must we. Its exporter is `http://<podIP>:<exporter_port>/metrics`.

The client is `kubernetes.aio` (native asyncio: cancellable, no thread per watch), configured from a kubeconfig
or the in-cluster service account by `load_configuration`. Responses are read as raw JSON rather than the
generated pydantic models: a watch is a stream the models cannot express, a list of 10,000 pods is far
cheaper to read as dicts, and a field a newer server adds can never fail validation here.

Errors: every failure of the library or the API surfaces from this module as `KubeDiscoveryError` (the library
exception chained as `__cause__`); `KubeApiStatusError` carries the HTTP code and the Status `reason`;
`WatchExpiredError` is the 410 that means "list again". The background loops catch them and keep going (an
unexpected exception is logged with its traceback and retried too: discovery must not stop silently).
`load_configuration()` and `start()` raise `KubeDiscoveryError` only for a client that cannot be configured
or created; `inventory()` and `close()` never raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from os import PathLike
from typing import Any, Final

import aiohttp
from kubernetes.aio.client import ApiClient, AppsV1Api, Configuration, CoreV1Api

from autoscaler.kube_config import KubeConfigError, load_kube_settings
from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory

log = logging.getLogger(__name__)

JSON = dict[str, Any]

MODELMESH_SERVICE_LABEL: Final = "modelmesh-service"
"""The label modelmesh-controller puts on runtime Deployments and their pods."""
MODELMESH_NAME_LABEL: Final = "name"
"""ModelMesh pods carry `name=<Deployment name>`: the selector used when a Deployment cannot be read."""
DEFAULT_EXPORTER_PORT: Final = 9187


class KubeDiscoveryError(Exception):
    """A call to the Kubernetes API failed; the library's exception, if any, is chained as `__cause__`."""


class KubeApiStatusError(KubeDiscoveryError):
    """The API server answered with an error Status (`code` is the HTTP status, `reason` the Status reason)."""

    def __init__(self, message: str, code: int, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class WatchExpiredError(KubeApiStatusError):
    """410: the resourceVersion to resume from is no longer retained; only a fresh list recovers."""


ClientFactory = Callable[[], "ApiClient | Awaitable[ApiClient]"]
"""Makes the API client when discovery starts; may be async (loading a kubeconfig is)."""


async def load_configuration(
    kubeconfig: str | PathLike[str] | None = None, context: str | None = None
) -> Configuration:
    """The shared connection settings (`autoscaler.kube_config`); a missing or broken config is a
    `KubeDiscoveryError`, so discovery's callers handle one error type."""
    try:
        return (await load_kube_settings(kubeconfig, context)).configuration
    except KubeConfigError as error:
        raise KubeDiscoveryError(f"pod discovery: {error}") from error


def kube_configuration(kubeconfig: str | PathLike[str] | None = None, context: str | None = None) -> ClientFactory:
    """What to connect with, for `KubePodDiscovery(kube_configuration(path))`: a factory that loads the kubeconfig
    (or the in-cluster settings when `kubeconfig` is None) when discovery starts, so building the app stays
    synchronous and a broken config surfaces from `start()` as a `KubeDiscoveryError`."""

    async def create() -> ApiClient:
        return ApiClient(await load_configuration(kubeconfig, context))

    return create


@dataclass(frozen=True, slots=True)
class _Pod:
    """The six fields of a pod that discovery uses."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ready: bool
    ip: str | None
    created_at: float | None


@dataclass(slots=True)
class _Runtime:
    """What the last Deployment read said about one runtime."""

    key: RuntimeKey
    selector: dict[str, str]
    replicas: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)


Scope = str | None
"""What one watch covers: a namespace, or None for all namespaces."""


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
        resync_interval_s: float = 30.0,
        request_timeout_s: float = 10.0,
        watch_timeout_s: int = 60,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        start_timeout_s: float | None = None,
        pod_label_selector: str = MODELMESH_SERVICE_LABEL,
        deployment_label_selector: str = MODELMESH_SERVICE_LABEL,
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
        first list (default: twice the request timeout).

        `healthy` is one flag for the whole inventory (the `PodDiscovery` contract): a namespace whose pods
        cannot be watched (RBAC) keeps every runtime's snapshot `source_ok=False`, which is loud on purpose.
        """
        self._static = tuple(dict.fromkeys(runtimes))
        if not self._static and not discover:
            raise ValueError("nothing to discover: give runtimes, or discover=True")
        self._client_factory = _client_factory(client) if isinstance(client, Configuration) else client
        self._discover = discover
        self._namespaces = tuple(dict.fromkeys(namespaces)) if namespaces else None
        self._exporter_port = exporter_port
        self._resync_interval_s = resync_interval_s
        self._request_timeout_s = float(request_timeout_s)
        self._watch_timeout_s = int(watch_timeout_s)
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._start_timeout_s = start_timeout_s if start_timeout_s is not None else 2 * float(request_timeout_s)
        self._pod_selector = pod_label_selector
        self._deployment_selector = deployment_label_selector

        self._scopes: tuple[Scope, ...]
        if discover and self._namespaces is None:
            self._scopes = (None,)
        else:
            self._scopes = tuple(sorted({*(self._namespaces or ()), *(key.namespace for key in self._static)}))

        self._runtimes: dict[RuntimeKey, _Runtime] = {
            key: _Runtime(key, _fallback_selector(key)) for key in self._static
        }
        self._pods: dict[Scope, dict[tuple[str, str], _Pod]] = {scope: {} for scope in self._scopes}
        self._scope_ok: dict[Scope, bool] = dict.fromkeys(self._scopes, False)
        self._deployments_ok = False
        self._missing: set[RuntimeKey] = set()  # configured runtimes whose Deployment was not found
        self._api: ApiClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._version = 0
        self._cache: tuple[int, dict[RuntimeKey, RuntimeInventory]] | None = None

    # ---- PodDiscovery ------------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False until the first list, and while any watch or the Deployment read is failing."""
        return bool(self._tasks) and self._deployments_ok and all(self._scope_ok.values())

    async def start(self) -> None:
        """Start the watch and resync loops; return after their first attempt (or `start_timeout_s`)."""
        if self._tasks:
            return
        try:
            made = self._client_factory()
            self._api = await made if inspect.isawaitable(made) else made
        except KubeDiscoveryError:
            raise
        except Exception as error:
            raise KubeDiscoveryError(f"cannot create the Kubernetes client: {_describe(error)}") from error
        self._scope_ok = dict.fromkeys(self._scopes, False)
        self._deployments_ok = False
        first_attempts: list[asyncio.Event] = []
        resync_done = asyncio.Event()
        first_attempts.append(resync_done)
        self._tasks.append(asyncio.create_task(self._resync_loop(resync_done), name="kube-discovery-deployments"))
        for scope in self._scopes:
            done = asyncio.Event()
            first_attempts.append(done)
            name = f"kube-discovery-pods-{scope or 'all-namespaces'}"
            self._tasks.append(asyncio.create_task(self._watch_loop(scope, done), name=name))
        try:
            async with asyncio.timeout(self._start_timeout_s):
                await asyncio.gather(*(event.wait() for event in first_attempts))
        except TimeoutError:
            log.warning("Kubernetes discovery: no first inventory within %.1f s; continuing", self._start_timeout_s)

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        """Runtimes and their pods as last seen; rebuilt only after a change, so calling it is cheap."""
        if self._cache is not None and self._cache[0] == self._version:
            return dict(self._cache[1])
        by_namespace: dict[str, list[_Pod]] = {}
        for pods in self._pods.values():
            for pod in pods.values():
                by_namespace.setdefault(pod.namespace, []).append(pod)
        result: dict[RuntimeKey, RuntimeInventory] = {}
        for key in sorted(self._runtimes):
            runtime = self._runtimes[key]
            targets = sorted(
                (self._target(pod) for pod in by_namespace.get(key.namespace, ()) if _selects(runtime.selector, pod)),
                key=lambda target: target.name,
            )
            result[key] = RuntimeInventory(key, tuple(targets), runtime.replicas, dict(runtime.annotations))
        self._cache = (self._version, result)
        return dict(result)

    async def close(self) -> None:
        """Stop every loop and close the client; safe to call twice."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._api is not None:
            api, self._api = self._api, None
            with contextlib.suppress(Exception):
                await api.close()  # type: ignore[no-untyped-call]

    # ---- loops -------------------------------------------------------------------------------------------

    async def _watch_loop(self, scope: Scope, first_attempt: asyncio.Event) -> None:
        """List then watch one scope forever: resume after a clean end, re-list after 410, back off on errors."""
        resource_version: str | None = None
        consistent = False  # the first list may come from the API server's cache; a re-list after 410 may not
        failures = 0
        expiries = 0
        while True:
            try:
                if resource_version is None:
                    resource_version = await self._relist(scope, consistent)
                    self._set_scope_ok(scope, True)
                    first_attempt.set()
                resource_version = await self._watch(scope, resource_version)
                failures = expiries = 0
            except WatchExpiredError as error:
                log.info("Kubernetes discovery: pod watch of %s expired (%s); listing again", _scope(scope), error)
                resource_version = None
                consistent = True
                expiries += 1
                if expiries > 1:  # expired again right after a fresh list: do not hammer the API server
                    await asyncio.sleep(self._backoff(expiries - 1))
            except Exception as error:
                if not isinstance(error, KubeDiscoveryError):
                    log.exception("Kubernetes discovery: unexpected error in the pod watch of %s", _scope(scope))
                failures += 1
                self._set_scope_ok(scope, False, error)
                first_attempt.set()
                await asyncio.sleep(self._backoff(failures))

    async def _resync_loop(self, first_attempt: asyncio.Event) -> None:
        """Re-read Deployments every `resync_interval_s`; sooner, with backoff, after a failure."""
        failures = 0
        while True:
            try:
                await self._refresh_deployments()
            except Exception as error:
                if not isinstance(error, KubeDiscoveryError):
                    log.exception("Kubernetes discovery: unexpected error reading runtime Deployments")
                failures += 1
                if self._deployments_ok or failures == 1:
                    log.warning("Kubernetes discovery: cannot read runtime Deployments: %s", error)
                self._deployments_ok = False
                delay = min(self._backoff(failures), self._resync_interval_s)
            else:
                if not self._deployments_ok and failures:
                    log.info("Kubernetes discovery: runtime Deployments readable again")
                self._deployments_ok = True
                failures = 0
                delay = self._resync_interval_s
            first_attempt.set()
            await asyncio.sleep(delay)

    def _backoff(self, failures: int) -> float:
        base = min(self._backoff_max_s, self._backoff_initial_s * 2.0 ** min(failures - 1, 30))
        return float(base * (0.8 + 0.4 * random.random()))

    def _set_scope_ok(self, scope: Scope, ok: bool, error: Exception | None = None) -> None:
        if ok and not self._scope_ok[scope]:
            log.info("Kubernetes discovery: pod watch of %s established", _scope(scope))
        elif not ok and self._scope_ok[scope]:
            log.warning(
                "Kubernetes discovery: pod watch of %s broken, keeping last inventory: %s", _scope(scope), error
            )
        elif not ok:
            log.debug("Kubernetes discovery: pod watch of %s still failing: %s", _scope(scope), error)
        self._scope_ok[scope] = ok

    # ---- pods --------------------------------------------------------------------------------------------

    async def _relist(self, scope: Scope, consistent: bool) -> str:
        """Replace the scope's pods with a fresh list; returns the list's resourceVersion to watch from."""
        core = CoreV1Api(self._client())
        options: dict[str, Any] = {
            "label_selector": self._pod_selector,
            "_request_timeout": self._request_timeout_s,
        }
        if not consistent:
            options["resource_version"] = "0"
        if scope is None:
            call = partial(core.list_pod_for_all_namespaces_without_preload_content, **options)
        else:
            call = partial(core.list_namespaced_pod_without_preload_content, scope, **options)
        document = await self._read_json(call, f"list pods in {_scope(scope)}")
        pods: dict[tuple[str, str], _Pod] = {}
        for item in document.get("items") or []:
            pod = _parse_pod(item)
            if pod is not None:
                pods[(pod.namespace, pod.name)] = pod
        self._pods[scope] = pods
        self._changed()
        version = (document.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise KubeDiscoveryError(f"list pods in {_scope(scope)}: the answer has no resourceVersion")
        return version

    async def _watch(self, scope: Scope, resource_version: str) -> str:
        """Follow one watch request until the server ends it; returns the newest resourceVersion seen."""
        core = CoreV1Api(self._client())
        options: dict[str, Any] = {
            "label_selector": self._pod_selector,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "watch": True,
            "timeout_seconds": self._watch_timeout_s,
            # The client-side limit is the whole stream; it only catches a server that stopped talking.
            "_request_timeout": float(self._watch_timeout_s) + self._request_timeout_s,
        }
        what = f"watch pods in {_scope(scope)}"
        try:
            if scope is None:
                response = await core.list_pod_for_all_namespaces_without_preload_content(**options)
            else:
                response = await core.list_namespaced_pod_without_preload_content(scope, **options)
        except Exception as error:
            raise KubeDiscoveryError(f"{what}: {_describe(error)}") from error
        try:
            if response.status >= 300:
                body = await _read_body(response, what)
                raise _status_error(what, response.status, body)
            self._set_scope_ok(scope, True)
            while True:
                try:
                    line = await response.content.readline()
                except Exception as error:
                    raise KubeDiscoveryError(f"{what}: stream broken: {_describe(error)}") from error
                if not line:
                    return resource_version
                if not line.strip():
                    continue
                resource_version = self._apply_event(scope, line, what) or resource_version
        finally:
            response.release()

    def _apply_event(self, scope: Scope, line: bytes, what: str) -> str | None:
        """Fold one watch event into the inventory; returns its resourceVersion."""
        try:
            event = json.loads(line)
        except ValueError as error:
            raise KubeDiscoveryError(f"{what}: undecodable event: {line[:200]!r}") from error
        if not isinstance(event, dict):
            raise KubeDiscoveryError(f"{what}: unexpected event: {line[:200]!r}")
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise KubeDiscoveryError(f"{what}: event without object: {line[:200]!r}")
        if kind == "ERROR":
            raise _status_error(what, int(obj.get("code") or 500), obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            return version if isinstance(version, str) else None
        pod = _parse_pod(obj)
        if pod is None:
            log.debug("Kubernetes discovery: ignoring malformed pod in %s event", kind)
            return version if isinstance(version, str) else None
        pods = self._pods.setdefault(scope, {})
        key = (pod.namespace, pod.name)
        if kind in ("ADDED", "MODIFIED"):
            if pods.get(key) != pod:  # most MODIFIED events (annotation writes, status chatter) change nothing here
                pods[key] = pod
                self._changed()
        elif kind == "DELETED":
            if pods.pop(key, None) is not None:
                self._changed()
        else:
            log.debug("Kubernetes discovery: ignoring %r event", kind)
        return version if isinstance(version, str) else None

    def _target(self, pod: _Pod) -> PodTarget:
        url = None
        if pod.ip:
            host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
            url = f"http://{host}:{self._exporter_port}/metrics"
        return PodTarget(pod.name, pod.ready, url, pod.created_at)

    # ---- deployments -------------------------------------------------------------------------------------

    async def _refresh_deployments(self) -> None:
        """Read every runtime's Deployment; replace the runtime table only when every read worked."""
        apps = AppsV1Api(self._client())
        fresh: dict[RuntimeKey, _Runtime] = {}
        reads = [self._read_deployment(apps, key) for key in self._static]
        for outcome in await asyncio.gather(*reads, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
            fresh[outcome.key] = outcome
        if self._discover:
            for namespace in self._namespaces if self._namespaces is not None else (None,):
                for runtime in await self._list_deployments(apps, namespace):
                    fresh.setdefault(runtime.key, runtime)
        if _runtime_table(fresh) != _runtime_table(self._runtimes):
            added = sorted(str(key) for key in fresh.keys() - self._runtimes.keys())
            removed = sorted(str(key) for key in self._runtimes.keys() - fresh.keys())
            if added or removed:
                log.info("Kubernetes discovery: runtimes added %s, removed %s", added or "none", removed or "none")
            self._runtimes = fresh
            self._changed()

    async def _read_deployment(self, apps: AppsV1Api, key: RuntimeKey) -> _Runtime:
        what = f"read Deployment {key}"
        call = partial(
            apps.read_namespaced_deployment_without_preload_content,
            key.deployment,
            key.namespace,
            _request_timeout=self._request_timeout_s,
        )
        try:
            document = await self._read_json(call, what)
        except KubeApiStatusError as error:
            if error.code != 404:
                raise
            if key not in self._missing:
                self._missing.add(key)
                log.warning("Kubernetes discovery: configured runtime %s has no Deployment (yet)", key)
            return _Runtime(key, _fallback_selector(key))
        self._missing.discard(key)
        return _runtime_from(document, key)

    async def _list_deployments(self, apps: AppsV1Api, namespace: str | None) -> list[_Runtime]:
        options: dict[str, Any] = {
            "label_selector": self._deployment_selector,
            "_request_timeout": self._request_timeout_s,
        }
        if namespace is None:
            call = partial(apps.list_deployment_for_all_namespaces_without_preload_content, **options)
        else:
            call = partial(apps.list_namespaced_deployment_without_preload_content, namespace, **options)
        document = await self._read_json(call, f"list Deployments in {_scope(namespace)}")
        runtimes = []
        for item in document.get("items") or []:
            metadata = _mapping(_mapping(item).get("metadata"))
            name, item_namespace = metadata.get("name"), metadata.get("namespace")
            if isinstance(name, str) and isinstance(item_namespace, str):
                runtimes.append(_runtime_from(item, RuntimeKey(item_namespace, name)))
        return runtimes

    # ---- plumbing ----------------------------------------------------------------------------------------

    def _client(self) -> ApiClient:
        if self._api is None:
            raise KubeDiscoveryError("discovery is not started")
        return self._api

    def _changed(self) -> None:
        self._version += 1

    async def _read_json(self, call: Callable[[], Awaitable[aiohttp.ClientResponse]], what: str) -> JSON:
        """Make a raw API call and decode its JSON body; every failure becomes a `KubeDiscoveryError`.

        The call is made inside the guard: the generated methods validate their arguments when called."""
        try:
            response = await call()
        except Exception as error:
            raise KubeDiscoveryError(f"{what}: {_describe(error)}") from error
        try:
            body = await _read_body(response, what)
        finally:
            response.release()
        if response.status >= 300:
            raise _status_error(what, response.status, body)
        if not isinstance(body, dict):
            raise KubeDiscoveryError(f"{what}: the answer is not a JSON object")
        return body


def _client_factory(configuration: Configuration) -> Callable[[], ApiClient]:
    def create() -> ApiClient:
        return ApiClient(configuration)

    return create


async def _read_body(response: aiohttp.ClientResponse, what: str) -> Any:
    try:
        raw = await response.read()
    except Exception as error:
        raise KubeDiscoveryError(f"{what}: reading the answer failed: {_describe(error)}") from error
    try:
        return json.loads(raw) if raw else None
    except ValueError as error:
        if response.status >= 300:
            return raw.decode("utf-8", "replace")
        raise KubeDiscoveryError(f"{what}: the answer is not JSON") from error


def _status_error(what: str, code: int, body: Any) -> KubeApiStatusError:
    """The error for a failed answer, from its Status object when there is one."""
    reason = ""
    message = ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
        code = int(body.get("code") or code)
    elif isinstance(body, str):
        message = body.strip()[:200]
    text = f"{what}: {code} {reason}: {message}".rstrip(": ")
    if code == 410:
        return WatchExpiredError(text, code, reason)
    return KubeApiStatusError(text, code, reason)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _scope(scope: Scope) -> str:
    return f"namespace {scope}" if scope is not None else "all namespaces"


def _parse_pod(obj: Any) -> _Pod | None:
    """The fields discovery needs, or None for an object that is not a usable pod."""
    metadata = _mapping(_mapping(obj).get("metadata"))
    status = _mapping(_mapping(obj).get("status"))
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    labels = {str(k): str(v) for k, v in _mapping(metadata.get("labels")).items()}
    terminating = metadata.get("deletionTimestamp") is not None
    conditions = status.get("conditions")
    ready = (
        not terminating
        and isinstance(conditions, list)
        and any(_mapping(c).get("type") == "Ready" and _mapping(c).get("status") == "True" for c in conditions)
    )
    ip = status.get("podIP")
    return _Pod(
        name,
        namespace,
        labels,
        ready,
        ip if isinstance(ip, str) and ip else None,
        _parse_time(metadata.get("creationTimestamp")),
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else empty: a malformed field must not break discovery."""
    return value if isinstance(value, dict) else {}


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _runtime_from(deployment: JSON, key: RuntimeKey) -> _Runtime:
    metadata = _mapping(deployment.get("metadata"))
    spec = _mapping(deployment.get("spec"))
    match_labels = _mapping(_mapping(spec.get("selector")).get("matchLabels"))
    selector = {str(k): str(v) for k, v in match_labels.items()} or _fallback_selector(key)
    replicas = spec.get("replicas", 1)  # the API defaults an unset replicas to 1
    annotations = {str(k): str(v) for k, v in _mapping(metadata.get("annotations")).items()}
    return _Runtime(key, selector, replicas if isinstance(replicas, int) else None, annotations)


def _fallback_selector(key: RuntimeKey) -> dict[str, str]:
    """Without a readable `matchLabels`, select ModelMesh's own pod label for the Deployment (never all pods)."""
    return {MODELMESH_NAME_LABEL: key.deployment}


def _selects(selector: Mapping[str, str], pod: _Pod) -> bool:
    return all(pod.labels.get(key) == value for key, value in selector.items())


def _runtime_table(runtimes: Mapping[RuntimeKey, _Runtime]) -> dict[RuntimeKey, tuple[Any, ...]]:
    return {
        key: (tuple(sorted(r.selector.items())), r.replicas, tuple(sorted(r.annotations.items())))
        for key, r in runtimes.items()
    }
