"""The composition root of `modelmesh-autoscaler serve`: builds discovery, source, policies, the refresh
loop and the API from the settings, and runs them in one event loop.

With `--workers 0` (`serve_in_process`) that loop also serves, and stops the way the refresh process of
`--workers N` stops its workers (`autoscaler.workers`): on SIGTERM with a `--shutdown-delay`, the refresh stops,
`/readyz` fails, writing stops and the Lease is released, the port answers for the delay (the Service's endpoints
drop a terminating pod only a moment after it is signalled), then it closes.

Start-up mistakes (missing files, contradictory flags) stop the process with one clear line; everything
that can fail later (Kubernetes, exporters, Prometheus) is handled where it happens and never stops serving.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import web

from autoscaler.actuation.cluster_pods import ClusterPods
from autoscaler.actuation.writes_off import bridges_replicas, start_writing, unwritten_costs_warning
from autoscaler.api.app import build_served_app
from autoscaler.api.certs import self_signed_server_context, server_context
from autoscaler.costs_left_outside import CostsLeftOutside, PodCostsSeen
from autoscaler.gcsettings import CollectAfterRefresh
from autoscaler.kube.watch_health import WatchHealth
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_origins import FLAG_DESTS, flag_origins
from autoscaler.policies.policy_values import apply_overrides
from autoscaler.refresher import Refresher, RefreshListener
from autoscaler.running_clock import SourceWait
from autoscaler.runtimes_outside_namespaces import namespaces_as_given, warnings_by_runtime
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.serve_args import given_as
from autoscaler.serving_names import self_signed_hosts
from autoscaler.settings import ServeSettings, is_loopback
from autoscaler.sources.base import DiscoveryScopes, MetricSource, PodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from autoscaler.sources.scrape_tls import exporter_client_tls
from autoscaler.sources.targets import StaticTargetsDiscovery
from exporter.flag_values import without_password
from exporter.stopping import stop_tasks

if TYPE_CHECKING:
    from autoscaler.actuation.actuator import DeletionCostActuator
    from autoscaler.sources.kube_hpas import HpaWatch

log = logging.getLogger(__name__)


class StartupError(Exception):
    """A configuration problem found before serving; the message says what to change."""


def policy_book(settings: ServeSettings) -> PolicyBook:
    """Built-in defaults, then the flags that set a field for every runtime, then the config file."""
    overrides: dict[str, object] = {
        "skew_order": settings.skew_order,
        "scale_down_tau_s": settings.scale_down_tau_s,
        "max_staleness_s": settings.default_max_staleness_s,
        "min_coverage": settings.min_coverage,
    }
    base = apply_overrides(RuntimePolicy(), {k: v for k, v in overrides.items() if v is not None})
    given_by = policy_keys_given(settings)
    if settings.config is None:
        return PolicyBook(defaults=base, origins={None: flag_origins(base, given_by)})
    return load_policy_book(settings.config, base=base, given_by=given_by)


def policy_keys_given(settings: ServeSettings) -> dict[str, str]:
    """Where each policy key a flag or its variable set came from (`flag --skew-order`, `variable
    AUTOSCALER_SKEW_ORDER`): only those a user wrote, not `max_staleness_s` derived from `--refresh-interval`."""
    given = dict(settings.given_by)
    return {key: given[dest] for key, dest in FLAG_DESTS.items() if dest in given}


def build_discovery(settings: ServeSettings, policies: PolicyBook, health: WatchHealth | None = None) -> PodDiscovery:
    """The targets file, or the Kubernetes API: every ModelMesh runtime Deployment it finds, plus the
    runtimes the config file names (served even before their Deployment exists)."""
    if settings.targets is not None:
        return StaticTargetsDiscovery(settings.targets)
    from autoscaler.sources.kube_pods import KubePodDiscovery, kube_configuration

    return KubePodDiscovery(
        kube_configuration(settings.kubeconfig),
        runtimes=list(policies.runtimes),
        namespaces=settings.namespaces,
        exporter_port=settings.exporter_port,
        exporter_scheme=settings.exporter_scheme,
        health=health,
    )


def build_hpa_watch(settings: ServeSettings, health: WatchHealth | None = None) -> HpaWatch | None:
    """In cluster mode, the HPAs of the watched namespaces, for their replica bounds (docs/design.md, Bounds)."""
    if settings.targets is not None:
        return None
    from autoscaler.sources.kube_hpas import HpaWatch
    from autoscaler.sources.kube_pods import kube_configuration

    return HpaWatch(kube_configuration(settings.kubeconfig, part="hpa-watch"), settings.namespaces, health=health)


def build_source(settings: ServeSettings, discovery: PodDiscovery) -> MetricSource:
    if settings.source == "prometheus":
        if not settings.prometheus_url:
            raise StartupError("--source prometheus needs --prometheus-url")
        from autoscaler.sources.prometheus import PrometheusSource

        pod_moved = settings.dcgm_pod_label.startswith("exported_")
        if settings.gpu_source == "dcgm" and pod_moved != settings.dcgm_namespace_label.startswith("exported_"):
            # Prometheus moves both to exported_* when it does not honour the DCGM exporter's labels: one of them
            # alone finds no pod's GPU, and nothing else would say why.
            flag, value, wanted = (("--dcgm-namespace-label", settings.dcgm_namespace_label, "exported_namespace")
                                   if pod_moved else ("--dcgm-pod-label", settings.dcgm_pod_label, "exported_pod"))
            log.warning("%s is %s while the other DCGM label is exported_*: where Prometheus does not honour the "
                        "DCGM exporter's labels it moves both, so set %s %s", flag, value, flag, wanted)
        return PrometheusSource(discovery, settings.prometheus_url, gpu_source=settings.gpu_source,
                                verify=str(settings.prometheus_ca_file) if settings.prometheus_ca_file else True,
                                token_file=settings.prometheus_token_file,
                                headers=dict(settings.prometheus_headers),
                                timeout_s=settings.prometheus_timeout_s,
                                max_staleness_s=settings.default_max_staleness_s,
                                namespace_label=settings.prometheus_namespace_label,
                                pod_label=settings.prometheus_pod_label,
                                series_selector=settings.prometheus_series_selector,
                                dcgm_namespace_label=settings.dcgm_namespace_label,
                                dcgm_pod_label=settings.dcgm_pod_label)
    if settings.gpu_source == "dcgm":
        raise StartupError("--gpu-source dcgm reads DCGM_FI_DEV_GPU_UTIL from Prometheus: use --source prometheus")
    tls = exporter_client_tls(settings.exporter_ca_file, settings.exporter_client_cert_file,
                              settings.exporter_client_key_file)
    return ScrapeSource(discovery, timeout_s=settings.scrape_timeout_s, concurrency=settings.scrape_concurrency,
                        deadline_s=settings.refresh_interval_s, ssl_context=tls.context,
                        server_name=settings.exporter_server_name, client_certificate=tls.client_certificate)


def source_wait(settings: ServeSettings) -> SourceWait:
    """The source a refresh waits on, as a refresh late on it is said (`autoscaler.running_clock`), and the longest
    one read of it may wait (`ServeSettings.source_deadline_s`)."""
    if settings.source == "prometheus":
        return SourceWait(f"Prometheus at {without_password(settings.prometheus_url or '')}",
                          f"{given_as(settings, 'prometheus_timeout')} {settings.prometheus_timeout_s:g} s",
                          deadline_s=settings.source_deadline_s)
    return SourceWait("the scrape of the exporters",
                      f"its deadline, {given_as(settings, 'refresh_interval')} {settings.refresh_interval_s:g} s",
                      deadline_s=settings.source_deadline_s)


def tls_context(settings: ServeSettings) -> ssl.SSLContext:
    if settings.tls_cert_file and settings.tls_private_key_file:
        return server_context(settings.tls_cert_file, settings.tls_private_key_file)
    if settings.tls_cert_file or settings.tls_private_key_file:
        raise StartupError("--tls-cert-file and --tls-private-key-file go together")
    log.info("no --tls-cert-file given: serving with a generated self-signed certificate")
    return self_signed_server_context("modelmesh-autoscaler", self_signed_hosts(settings))


class ServingRefresher(Refresher):
    """The refresh loop, with a readiness that can be failed for good while its values stay served: how a
    process that serves its own refresh (`--workers 0`) fails `/readyz` once SIGTERM came (the workers of
    `--workers N` get a snapshot marked not ready instead)."""

    _ready_withdrawn = False

    @property
    def ready(self) -> bool:
        return super().ready and not self._ready_withdrawn

    def withdraw_readiness(self) -> None:
        self._ready_withdrawn = True


class RefreshStack:
    """Everything behind the answers: discovery, the metric source, the HPA watch and the refresh loop.

    Built the same way whether the refresh shares its process with serving (`--workers 0`) or runs apart
    from the serving workers, so that both start and stop the same parts in the same order.
    """

    def __init__(self, settings: ServeSettings) -> None:
        self.metrics = AdapterMetrics(per_runtime=settings.per_runtime_metrics, bridge=bridges_replicas(settings))
        policies = policy_book(settings)
        self.discovery = build_discovery(settings, policies, self.metrics)
        self.source = build_source(settings, self.discovery)
        self.refresher = ServingRefresher(self.source, policies, self.metrics,
                                          interval_s=settings.refresh_interval_s, window_s=settings.window_s,
                                          source_wait=source_wait(settings))
        self.refresher.configured_warnings = warnings_by_runtime(settings, policies.runtimes)
        self.refresher.costs_written = settings.deletion_cost
        self.refresher.costs_unwritten = unwritten_costs_warning(settings)
        if self.refresher.configured_warnings and settings.deletion_cost and isinstance(self.discovery, PodCostsSeen):
            self.refresher.costs_left_outside = CostsLeftOutside(
                given_as(settings, "namespaces"), namespaces_as_given(settings), self.discovery)
        # the last of the listeners (`listen` adds the others before it): the serving workers get each refresh's
        # snapshot before the full collection the refresh may end with, not after it; what publishing leaves in
        # cycles is collected then, or after a later refresh
        self._collect_after_refresh = CollectAfterRefresh().after_refresh  # autoscaler/gcsettings.py
        self.refresher.listeners.append(self._collect_after_refresh)
        self.hpas = build_hpa_watch(settings, self.metrics)
        if self.hpas is not None:
            self.refresher.hpa_bounds = self.hpas.bounds
            self.refresher.hpa_warnings = self.hpas.warnings
        if isinstance(self.discovery, DiscoveryScopes):  # asked by what it has: a targets file has no scopes
            self.refresher.discovery_health = self.discovery.scope_health

    def listen(self, listener: RefreshListener) -> None:
        """Hand each refresh's views to `listener` too, before the garbage collection that may end the refresh:
        a full collection publishing waited behind delayed every refresh's values to the serving workers."""
        listeners = self.refresher.listeners
        listeners.insert(listeners.index(self._collect_after_refresh), listener)

    @property
    def cluster_pods(self) -> ClusterPods | None:
        """The pod objects as discovery last saw them (with Kubernetes discovery): their deletion-cost annotation,
        for the writer of a new term to leave the pods that already carry the right cost, and their uid, to
        write a pod created again under its name. Only Kubernetes discovery sees pod objects (a targets file
        names none); asked by what it has, not by class, so that a targets file never imports the Kubernetes
        client."""
        return self.discovery if isinstance(self.discovery, ClusterPods) else None

    async def start(self) -> None:
        """Discovery and the HPA watch; the caller runs `refresher.run()` once they are started."""
        await self.discovery.start()
        if self.hpas is not None:
            await self.hpas.start()

    async def close(self) -> None:
        if self.hpas is not None:
            await self.hpas.close()
        await self.source.close()
        await self.discovery.close()


class OneProcessLifecycle:
    """The refresh loop and the writing side of the one-process mode, started with the app. `drain()` stops
    them in the order the refresh process of `--workers N` does (the refresh, readiness, the writes and the
    Lease), either early, on SIGTERM while the port still answers, or at the app's cleanup; only its first call
    does anything."""

    def __init__(self, settings: ServeSettings, stack: RefreshStack) -> None:
        self._settings = settings
        self._stack = stack
        self._refreshing: asyncio.Task[None] | None = None
        self._actuator: DeletionCostActuator | None = None
        self._drained = False

    async def refresh_context(self, app: web.Application) -> AsyncIterator[None]:
        """An `app.cleanup_ctx` entry: discovery and the HPA watch (the refresh loop starts with the writing side,
        `actuator_context`)."""
        await self._stack.start()
        yield
        await self.drain()
        await self._stack.close()

    async def actuator_context(self, app: web.Application) -> AsyncIterator[None]:
        """An `app.cleanup_ctx` entry after the stack's: deletion costs, the bridge, the Lease, then the refresh loop,
        as the refresh process of `--workers N` starts them: a first refresh before the bridge's RuntimeScale
        watches exist took "no bridge" for "no RuntimeScale" and warmed runtimes up from their Deployments alone,
        below what their HPAs had asked (`autoscaler.policies.warmup`)."""
        stack = self._stack
        self._actuator = await start_writing(self._settings, stack.refresher, stack.metrics,
                                             cluster=stack.cluster_pods)
        self._refreshing = asyncio.create_task(stack.refresher.run(), name="refresh")
        yield
        await self.drain()

    async def drain(self) -> None:
        """Stop the refresh, fail readiness, stop writing and release the Lease (after the writes in flight)."""
        if self._drained:
            return
        self._drained = True
        if self._refreshing is not None:
            await stop_tasks([self._refreshing])  # even a refresh that takes its first cancel for a timeout
        self._stack.refresher.withdraw_readiness()  # /readyz fails; the last values stay served
        if self._actuator is not None:
            await self._actuator.stop()  # writes in flight answered, then the Lease released


async def build_app(settings: ServeSettings,
                    tls: ssl.SSLContext | None = None) -> tuple[web.Application, OneProcessLifecycle]:
    """The API application with the refresh behind it, in one process; `tls` is the serving context:
    authentication adds the client CAs to it."""
    stack = RefreshStack(settings)
    app = await build_served_app(stack.refresher, stack.metrics, settings, tls)
    lifecycle = OneProcessLifecycle(settings, stack)
    app.cleanup_ctx.append(lifecycle.refresh_context)
    # After the refresh loop: started once it runs, stopped (Lease released) before it stops.
    app.cleanup_ctx.append(lifecycle.actuator_context)
    return app, lifecycle


def serve(settings: ServeSettings) -> None:
    """`--workers N` (default 1): the refresh here, serving in N processes (`autoscaler.workers`);
    `--workers 0`: everything in this process. Called once `autoscaler.preflight.check_startup` passed (the CLI
    runs it before importing this module and its libraries)."""
    from autoscaler.open_files import raise_open_file_limit
    from autoscaler.preflight import with_chosen_port

    settings = with_chosen_port(settings)
    raise_open_file_limit()  # before the workers, which inherit it
    if settings.workers < 0:
        raise StartupError("--workers must be 0 (one process) or more")
    if settings.insecure_dev:
        if not is_loopback(settings.listen_host):
            log.warning("--insecure-dev binds loopback only: ignoring host %s, listening on 127.0.0.1",
                        settings.listen_host or "'' (every address)")
        log.warning("INSECURE DEV MODE: no authentication or authorization; never use this in a cluster")
    if settings.workers == 0:
        serve_in_process(settings)
        return
    from autoscaler.worker_pool import WorkerStartError
    from autoscaler.workers import serve_with_workers

    if settings.tls_cert_file and settings.tls_private_key_file:  # both or neither: `check_startup`
        files = (settings.tls_cert_file, settings.tls_private_key_file)
    else:
        log.info("no --tls-cert-file given: serving with a generated self-signed certificate")
        files = None
    try:
        code = serve_with_workers(settings, files)
    except WorkerStartError as error:
        raise StartupError(str(error)) from error
    if code:
        raise SystemExit(code)


def serve_in_process(settings: ServeSettings) -> None:
    """`--workers 0`. From here Ctrl-C is serving's (`autoscaler.cli` ended the start at once until now):
    KeyboardInterrupt, then, once serving, the process's stopping signals (`exporter.stop_signals`: SIGTERM,
    SIGINT, SIGHUP) stop the refresh and release the Lease. SIGTERM honours `--shutdown-delay` (the module's
    docstring)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from autoscaler.gcsettings import tune_for_refresh
    from autoscaler.serve_loop import connection_limits, serve_until_stopped
    from autoscaler.stop_budget import say_stop_budget
    from exporter.stack_dumps import StackDumps
    from exporter.stop_signals import StopSignals

    signals = StopSignals()
    StackDumps("adapter (one process, --workers 0)").install()

    host = settings.bound_host
    context = tls_context(settings)

    def announce() -> None:
        tune_for_refresh()  # start-up is over: the refresh runs in this process (autoscaler/gcsettings.py)
        log.info("serving external.metrics.k8s.io on %s (one process; source %s, refresh every %g s)",
                 settings.serving_url, settings.source, settings.refresh_interval_s)
        say_stop_budget(settings)

    async def run() -> None:
        app, lifecycle = await build_app(settings, context)
        await serve_until_stopped(app, host, settings.listen_port, context, connection_limits(settings),
                                  on_ready=announce, drain=lifecycle.drain, shutdown_delay_s=settings.shutdown_delay_s,
                                  signals=signals)

    asyncio.run(run())
    log.info("stopped (exit code 0)")  # as `--workers N` ends: a pod's log tells a clean stop from a kill
    signals.hold()
