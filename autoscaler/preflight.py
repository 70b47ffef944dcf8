"""Start-up checks of `serve`, run before anything binds, logs "serving" or starts a worker.

The mistakes a new user makes first (a policy file that is missing or wrong, no Kubernetes connection
settings outside a cluster, a targets file that cannot be read) would otherwise surface deep inside the
refresh loop, after the serving workers had started, as a traceback. Checked here, each is one
`PreflightError` whose message says what was wrong and what to do; the CLI prints it as one
"cannot start: ..." line and exits with status 2 (the traceback only at `--log-level DEBUG`).

Nothing here is kept: the parts that need the file or the connection load them again when they start, so a
check can never disagree with what runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.actuation.writes_off import elects_leader
from autoscaler.api.open_paths import AlwaysAllowPaths, OpenPathError
from autoscaler.kube.errors import KubeConfigError
from autoscaler.kube.where import default_kubeconfig, in_cluster, kubeconfig_found
from autoscaler.log_lists import in_words
from autoscaler.policies.config import ConfigError
from autoscaler.policies.config_file import load_policy_book
from autoscaler.runtimes_outside_namespaces import runtimes_outside_namespaces
from autoscaler.serve_args import given_as
from autoscaler.settings import ServeSettings
from autoscaler.sources.targets import TargetsFileError, load_targets
from exporter.listen import NO_SUCH_FAMILY, bind_listeners, listen_family, listen_fix
from exporter.tls_files import pair_problem

log = logging.getLogger(__name__)

_KUBE_LIBRARY_LOGGER = "kubernetes.aio.config.kube_config"
"""Logs "Config not found: PATH" as a WARNING of its own before failing: folded into our one line instead."""


class PreflightError(Exception):
    """A start-up mistake; the message (one line: YAML errors span several) names the setting to change."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def check_startup(settings: ServeSettings) -> None:
    """Raise `PreflightError` for the first mistake that would stop `serve` later."""
    _check_flag_rules(settings)
    _check_serving_certificate(settings)
    _check_exporter_client_certificate(settings)
    if settings.config is not None:
        try:
            book = load_policy_book(settings.config, announce=False)  # the refresh says what it finds
        except ConfigError as error:
            raise PreflightError(f"--config {error}; fix the file (docs/configuration.md, Policy) or leave "
                                 "--config out for the built-in defaults") from error
        if (outside := runtimes_outside_namespaces(settings, book.runtimes)) is not None:
            log.warning("%s", outside)  # here: once per start, before any worker, with the file just read
    if settings.targets is not None:
        try:
            load_targets(settings.targets)
        except TargetsFileError as error:
            raise PreflightError(f"--targets: {error}") from error
    if needs_kubernetes(settings) or settings.kubeconfig is not None:  # a file given must be usable
        _check_kube_settings(settings)
    _check_port(settings)


def _check_flag_rules(settings: ServeSettings) -> None:
    """The rules between flags (docs/configuration.md): the source's are otherwise found only when the
    refresh process builds its source, after the serving workers have started and "serving" was logged."""
    if settings.source == "prometheus" and not settings.prometheus_url:
        raise PreflightError("--source prometheus needs --prometheus-url")
    if settings.source != "prometheus" and settings.gpu_source == "dcgm":
        raise PreflightError("--gpu-source dcgm reads DCGM_FI_DEV_GPU_UTIL from Prometheus: use --source prometheus")
    if bool(settings.tls_cert_file) != bool(settings.tls_private_key_file):
        raise PreflightError("--tls-cert-file and --tls-private-key-file go together")
    if bool(settings.exporter_client_cert_file) != bool(settings.exporter_client_key_file):
        raise PreflightError("--exporter-client-cert-file and --exporter-client-key-file go together: the client "
                             "certificate and its private key, as a kubernetes.io/tls Secret's tls.crt and tls.key")
    try:
        AlwaysAllowPaths.parse(settings.authorization_always_allow_paths)
    except OpenPathError as error:  # kube refuses it at start too; accepted, it matched nothing
        raise PreflightError(str(error)) from error
    _check_leader_durations(settings)
    _warn_settings_of_the_other_source(settings)
    _warn_discovery_settings_with_targets(settings)
    if settings.tls_service and settings.tls_cert_file:
        log.warning("--tls-service does nothing with --tls-cert-file: it names the Service in the certificate the "
                    "adapter generates without one; the names your certificate holds are the ones served")


_PROMETHEUS_ONLY = ("prometheus_url", "prometheus_ca_file", "prometheus_token_file", "prometheus_headers",
                    "prometheus_timeout_s", "prometheus_namespace_label", "prometheus_pod_label",
                    "prometheus_series_selector",
                    "dcgm_pod_label", "dcgm_namespace_label")
_SCRAPE_ONLY = ("scrape_timeout_s", "scrape_concurrency", "exporter_ca_file", "exporter_scheme",
                "exporter_server_name", "exporter_client_cert_file", "exporter_client_key_file")


def _dest(field: str) -> str:
    """The flag's dest of a settings field (`prometheus_timeout_s`: `prometheus_timeout`)."""
    return field.removesuffix("_s")


def _flag(field: str) -> str:
    return "--" + _dest(field).replace("_", "-")


def _warn_settings_of_the_other_source(settings: ServeSettings) -> None:
    """A setting of the source not in use did nothing, silently: `--prometheus-url` alone looked like a switch to
    Prometheus, while the adapter went on scraping the exporters. Said once at start; not refused, so that an
    adapter with a leftover variable that starts today still starts after an upgrade."""
    defaults = ServeSettings()
    unused, fix = ((_PROMETHEUS_ONLY, _how_scrape_was_chosen(settings)) if settings.source != "prometheus" else
                   (_SCRAPE_ONLY, "--source prometheus: the adapter reads Prometheus, not the exporters"))
    given = [given_as(settings, _dest(name)) for name in unused if getattr(settings, name) != getattr(defaults, name)]
    if given:
        names = in_words(given)
        log.warning("%s %s not used with %s", names, "is" if len(given) == 1 else "are", fix)


def _how_scrape_was_chosen(settings: ServeSettings) -> str:
    """`--source scrape` as the user chose it, and how to read Prometheus instead. Where a `--source prometheus`
    or `AUTOSCALER_SOURCE=prometheus` was given and a later `--source scrape` won (a Deployment's arg left below
    the one added), "(the default): add --source prometheus" was false twice: both are named."""
    where = dict(settings.given_by).get("source")
    if where is None:
        return "--source scrape (the default): add --source prometheus to read Prometheus"
    if where.startswith("variable "):
        return f"{given_as(settings, 'source')}=scrape: make it prometheus to read Prometheus"
    replaced = [item for item in settings.overridden if item.dest == "source"]
    earlier_flags = [f"--source {item.value}" for item in replaced if item.given_as.startswith("flag ")]
    if earlier_flags:
        return (f"--source scrape, the last --source given (a flag given twice keeps its last value: "
                f"{in_words(earlier_flags)} before it did nothing): give --source once, as --source prometheus, to "
                "read Prometheus")
    variables = [f"{item.given_as.removeprefix('variable ')}={item.value}" for item in replaced]
    if variables:
        return (f"--source scrape, given on the command line, which wins over {in_words(variables)}: drop the flag, "
                "or make it --source prometheus, to read Prometheus")
    return "--source scrape: make it --source prometheus to read Prometheus"


def _warn_discovery_settings_with_targets(settings: ServeSettings) -> None:
    """Settings of Kubernetes discovery given with a targets file, which names the runtimes and their pods'
    URLs: a runtime outside `--namespaces foo` was served and an explicit `--bridge on` did nothing, silently.
    Said once at start, as for the other source's settings."""
    if settings.targets is None:
        return
    defaults = ServeSettings()
    given = [_flag(name) for name in ("namespaces", "exporter_port", "exporter_scheme")
             if getattr(settings, name) != getattr(defaults, name)]
    if settings.bridge:
        given.append("--bridge on")
    if given:
        names = in_words(given)
        log.warning("%s %s nothing with --targets: the targets file names the runtimes served and their pods' URLs "
                    "(no Kubernetes discovery, no RuntimeScale bridge)", names, "does" if len(given) == 1 else "do")


def _check_leader_durations(settings: ServeSettings) -> None:
    """client-go's rules between the three leader-election durations, checked by the Lease's own config (one
    place for them): found only when the refresh process elected, they stopped a start already logged as
    serving. Only where a Lease is elected (`elects_leader`): elsewhere none of them is used, and the start-up
    warning (`autoscaler.unused_settings`) says so."""
    if not elects_leader(settings):
        return
    try:
        LeaseConfig(namespace="-", name=settings.leader_elect_lease_name, identity="preflight",
                    lease_duration_s=settings.leader_elect_lease_duration_s,
                    renew_deadline_s=settings.leader_elect_renew_deadline_s,
                    retry_period_s=settings.leader_elect_retry_period_s)
    except ValueError as error:
        raise PreflightError(str(error)) from error


def _check_serving_certificate(settings: ServeSettings) -> None:
    """The serving certificate and key load together (`pair_problem`: each file named under its flag)."""
    cert, key = settings.tls_cert_file, settings.tls_private_key_file
    if cert is None or key is None:
        return
    if problem := pair_problem(cert, key, "--tls-cert-file", "--tls-private-key-file"):
        raise PreflightError(problem)


def _check_exporter_client_certificate(settings: ServeSettings) -> None:
    """The client certificate for the exporters loads with its key, each file named under its flag: found at the
    first scrape instead, it stopped the refresh process after "serving" was logged."""
    cert, key = settings.exporter_client_cert_file, settings.exporter_client_key_file
    if cert is not None and key is not None and (
            problem := pair_problem(cert, key, "--exporter-client-cert-file", "--exporter-client-key-file")):
        raise PreflightError(problem)


def needs_kubernetes(settings: ServeSettings) -> bool:
    """Pods are discovered in Kubernetes without `--targets`; authentication always asks the Kubernetes API
    (TokenReview, SubjectAccessReview), so only `--insecure-dev --targets FILE` runs without it."""
    return settings.targets is None or not settings.insecure_dev


def _check_kube_settings(settings: ServeSettings) -> None:
    notes: list[str] = []
    try:
        if (paths := _kubeconfig_not_there(settings)) is not None:
            # No file to load: the library's own refusal, in its words, without importing it.
            notes.append(f"Config not found: {paths}")
            where = paths if settings.kubeconfig else "the in-cluster settings or the default kubeconfig"
            raise KubeConfigError(f"cannot load Kubernetes connection settings from {where}")
        # Here, not at the top: the Kubernetes library takes a third of a second or more to import, which a serve
        # of `--insecure-dev --targets FILE` (the demo's) does not need.
        from autoscaler.kube.config import load_kube_settings

        with _library_warnings_into(notes):
            asyncio.run(load_kube_settings(settings.kubeconfig))
    except KubeConfigError as error:
        # "Config not found: PATH" says more than the parse error the library raises after it.
        detail = f"no Kubernetes connection settings ({'; '.join(notes)})" if notes else str(error)
        if settings.kubeconfig is not None:
            fix = "fix or replace the file given with --kubeconfig"
        elif settings.insecure_dev:
            fix = ("--insecure-dev still discovers runtime pods in Kubernetes: pass --kubeconfig FILE, or list "
                   "the runtimes and their exporter URLs with --targets FILE")
        elif settings.targets is None:
            fix = ("pod discovery, authentication and authorization need the Kubernetes API: pass --kubeconfig "
                   "FILE or run in a cluster (a local demo without Kubernetes: --insecure-dev --targets FILE)")
        else:
            fix = ("authentication and authorization need the Kubernetes API: pass --kubeconfig FILE or run in "
                   "a cluster (a local demo without Kubernetes: --insecure-dev)")
        raise PreflightError(f"{detail}; {fix}") from error


def _kubeconfig_not_there(settings: ServeSettings) -> str | None:
    """The kubeconfig path (list) the settings would be loaded from, where none of its files is there; None where
    the library has something to judge (a file, or the pod's service account in a cluster)."""
    if settings.kubeconfig is None and in_cluster():
        return None
    paths = str(settings.kubeconfig) if settings.kubeconfig is not None else default_kubeconfig()
    return None if kubeconfig_found(paths) else paths


def with_chosen_port(settings: ServeSettings) -> ServeSettings:
    """`--listen HOST:0` ("any free port") made one port, chosen here: the log can name it, and serving workers,
    which bind with SO_REUSEPORT, share it (each binding port 0 would get a port of its own)."""
    if settings.listen_port != 0:
        return settings
    host = settings.bound_host
    # Free in every family the workers bind (no host: IPv4 and IPv6), as the exporter's port 0 is.
    probes = bind_listeners(host, 0, family=listen_family(host))
    port: int = probes[0].getsockname()[1]
    for probe in probes:
        probe.close()
    log.info("--listen port 0: serving on free port %d", port)
    return dataclasses.replace(settings, listen_port=port)


def _check_port(settings: ServeSettings) -> None:
    """A port in use, found before the refresh side starts (with `--workers 0` it would otherwise start, and
    the Lease be taken, before the bind fails). Serving workers bind with SO_REUSEPORT, which would silently
    share the port with another process of this user doing the same (a second adapter): the probe binds
    without it."""
    host, port = settings.bound_host, settings.listen_port
    if port == 0:
        return
    # No host: every address of both families (`exporter.listen.listen_family`), so both are probed; IPv6 only
    # where this machine has it.
    for family, address in ([(socket.AF_INET, ""), (socket.AF_INET6, "::")] if not host
                            else [(socket.AF_INET6 if ":" in host else socket.AF_INET, host)]):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # a kernel without IPv6
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as asyncio binds it
            try:
                probe.bind((address, port))
            except OSError as error:
                if not host and family == socket.AF_INET6 and error.errno in NO_SUCH_FAMILY:
                    continue  # IPv6 turned off here: IPv4 alone is served
                fix = ("choose another port with --listen, or stop the process that holds it"
                       if error.errno == errno.EADDRINUSE else f"{listen_fix(error)} with --listen")
                shown = f"[{address}]" if ":" in address else address
                raise PreflightError(f"cannot listen on {shown}:{port}: {error.strerror}; {fix}") from error


@contextmanager
def _library_warnings_into(notes: list[str]) -> Iterator[None]:
    """Collect what the Kubernetes library logs while loading, instead of letting it print a line of its own."""
    logger = logging.getLogger(_KUBE_LIBRARY_LOGGER)

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    handler = Collect(logging.WARNING)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
