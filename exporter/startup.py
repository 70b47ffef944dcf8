"""The exporter's start: settings, logging, the port, the pod's own GPUs, then serving. Kept out of `cli`, whose
module imports nothing but `sys`, so that a Ctrl-C while these modules load is caught there."""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.pod_identity import PodIdentity
    from exporter.settings import ExporterSettings

log = logging.getLogger("exporter")


def serve(argv: list[str] | None) -> None:
    from exporter.env_flags import overridden_said
    from exporter.settings import flag_of, parse_settings, setting, unknown_variables

    settings = parse_settings(argv)  # before aiohttp loads: `--help` or a refused flag at once
    from exporter.app import build_app, run
    from exporter.listen import ListenError, bind_listeners, bound_addresses
    from exporter.metrics_tls import serve_over_tls, serving_said

    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for warning in unknown_variables():
        log.warning("%s", warning)
    for warning in overridden_said(settings.overridden, flag_of):
        log.warning("%s", warning)
    from exporter.stack_dumps import StackDumps

    StackDumps("exporter").install()  # from here a hung start too (the kubelet, NVML) can be looked into
    from exporter.open_files import raise_open_file_limit

    raise_open_file_limit(
        "each client scraping /metrics (Prometheus, the adapter, which keeps its connection open) holds a file",
        "and at the limit the exporter accepts no more connections (logged 'out of file descriptors'): their "
        "scrapes fail", log)
    import signal

    for signum in (signal.SIGTERM, signal.SIGHUP):  # until serving takes them over (`exporter.app.run`)
        signal.signal(signum, _stopped_while_starting)
    refuse_another_pods_modelmesh(settings.modelmesh_url)
    tls = (
        "plain HTTP" if not settings.modelmesh_url.startswith("https")
        else "without verifying its certificate" if settings.modelmesh_insecure
        else f"trusting {settings.modelmesh_ca_file}" if settings.modelmesh_ca_file
        else "trusting the system CAs"
    )
    if settings.pod_resources_socket is not None and settings.gpu_enabled:
        settings = own_gpus(settings)
    try:
        # Bound before any collector starts or "serving" is said: a busy port is one line and nothing else.
        sockets = bind_listeners(settings.listen_host, settings.listen_port)
    except ListenError as error:
        log.error("cannot start: %s (%s with --listen or EXPORTER_LISTEN)", error, error.fix,
                  exc_info=settings.log_level == "DEBUG")
        sys.exit(2)
    # The scheme on the line that says where: what the adapter (--exporter-scheme) and Prometheus must scrape.
    scheme = ("HTTPS" if settings.tls_cert_file is not None
              else f"plain HTTP (no {setting('--tls-cert-file')})")
    log.info(
        "serving on %s; /metrics and /healthz over %s; reading ModelMesh at %s every %g s (%s; timeout %g s; "
        "load window %g s); GPU collector %s; %s",
        bound_addresses(sockets), scheme, settings.modelmesh_url, settings.modelmesh_interval_s,
        tls, settings.modelmesh_timeout_s, settings.load_window_s,
        "off" if not settings.gpu_enabled else "failing (this pod's GPUs are not known)"
        if settings.gpu_unattributed is not None else "on",
        pod_named(settings.identity),
    )
    if settings.tls_cert_file is not None:
        log.info("serving /metrics and /healthz over %s", serving_said(settings))
    if not settings.gpu_enabled:
        unused_gpu_settings(settings)
    unused_tls_settings(settings)
    if settings.modelmesh_insecure and settings.modelmesh_url.startswith("https"):
        log.info("--modelmesh-insecure (EXPORTER_MODELMESH_INSECURE): ModelMesh's certificate is not verified (its "
                 "metrics port makes a new self-signed one at every start)")
    # The access log only at DEBUG: one line per scrape otherwise fills the pod's log for nothing.
    app = build_app(settings)
    run(app, settings.listen_host, settings.listen_port, access_log=settings.log_level == "DEBUG", sockets=sockets,
        ssl_context=serve_over_tls(app, settings), max_connections=settings.max_connections)


def _stopped_while_starting(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP before serving (a pod deleted while its sidecar waits for the kubelet, up to
    `--gpu-pod-resources-wait`): one line and exit 0, as `serve` stops while starting, where it ended by the
    signal with no line (exit 143). Ended at once, as a Ctrl-C then ends (`exporter.cli`): raised instead, it could
    land in an import's callback and be lost; nothing is open yet that needs closing (a bound socket closes with
    the process)."""
    import os
    import signal

    log.info("%s while starting: stopped", signal.Signals(signum).name)
    os._exit(0)


def refuse_another_pods_modelmesh(url: str) -> None:
    """Stop the start (status 2) where `--modelmesh-url`'s host is not this pod's (`exporter.own_pod_url`: an IP
    literal of this pod or `localhost`; a name included), the line saying why and what to give."""
    from exporter.own_pod_url import check_url

    problem = check_url(url)
    if problem is not None:
        log.error("cannot start: %s", problem)
        sys.exit(2)


def pod_named(identity: PodIdentity) -> str:
    """The pod this exporter's answers name, as the serving line says it: what an operator checks first when the
    adapter refuses an answer as another pod's (`other_pod`), or when a sidecar left without the downward API's
    variables is why an IP given to a new pod went unnoticed. Naming none is not an error: it is read as before."""
    from exporter import names
    from exporter.settings import setting

    given = {"--pod-namespace": identity.namespace, "--pod-name": identity.name, "--pod-uid": identity.uid}
    missing = [setting(flag) for flag, value in given.items() if value is None]
    if len(missing) == len(given):
        return (f"naming no pod ({', '.join(missing)} not set): the adapter cannot tell this exporter's answers "
                "from another pod's given this pod's IP, and reads them as before, as in a rollout of mixed "
                "versions; set them from the downward API, as the example sidecar patch does")
    said = f"naming pod {identity} in {names.POD_INFO}"
    return f"{said}, without {' or '.join(missing)}" if missing else said


def unused_gpu_settings(settings: ExporterSettings) -> None:
    """The GPU settings `--no-gpu` leaves unused, named once: a sidecar told which GPUs to report and also to
    report none said nothing of the first."""
    from exporter.settings import setting

    given = [flag for flag, value in (("--gpu-uuids", settings.gpu_uuids),
                                      ("--gpu-pod-resources-socket", settings.pod_resources_socket)) if value]
    for flag in given:
        log.warning("%s is not used: %s turns the GPU collector off", setting(flag), setting("--no-gpu"))


def unused_tls_settings(settings: ExporterSettings) -> None:
    """The settings that verify ModelMesh's certificate, named once where `--modelmesh-url` is plain http://: a
    CA file given for it verified nothing, and said nothing of it."""
    from exporter.settings import setting

    if settings.modelmesh_url.lower().startswith("https://"):
        return
    given = [flag for flag, value in (("--modelmesh-ca-file", settings.modelmesh_ca_file),
                                      ("--modelmesh-insecure", settings.modelmesh_insecure)) if value]
    for flag in given:
        log.warning("%s is not used: %s is plain http://, with no certificate to verify; leave it out, or give an "
                    "https:// URL", setting(flag), setting("--modelmesh-url"))


def own_gpus(settings: ExporterSettings) -> ExporterSettings:
    """The settings with `gpu_uuids` set to the GPUs the kubelet allocated to this pod (the GPU collector off
    when it has none). The kubelet allocates devices before any container starts, so one question suffices.

    A kubelet that cannot be asked for good (no socket directory: the hostPath volume is not mounted; no
    permission; this pod not listed) leaves the GPU collector failing with the reason (`gpu_unattributed`) rather
    than report other pods' GPUs; the ModelMesh signals are served all the same. It stopped the start (exit 2):
    the sidecar crash-looped, which made the whole runtime pod not Ready. A kubelet that did not answer for
    `pod_resources_wait_s` (restarting) still stops the start: the container's restart asks it again."""
    import asyncio

    from exporter.pod_resources import (
        GKE_GPU,
        GKE_MIG,
        GPU_ID_PREFIXES,
        TURN_OFF_HINT,
        PodResourcesError,
        pod_claimed_gpus,
        pod_gpu_ids,
        pod_resources_waiting,
        pod_shared_gpus,
    )
    from exporter.settings import setting

    assert settings.pod_resources_socket is not None and settings.pod_name and settings.pod_namespace
    try:
        pods = asyncio.run(pod_resources_waiting(str(settings.pod_resources_socket), settings.pod_namespace,
                                                 settings.pod_name, settings.pod_resources_wait_s))
    except PodResourcesError as error:
        said = str(error) if TURN_OFF_HINT in str(error) else f"{error}; {TURN_OFF_HINT}"
        if error.transient:
            # A kubelet that did not answer for the wait may yet: the container's restart asks it again, where
            # serving on without GPUs would go without them until some later restart.
            log.error("cannot start: the kubelet did not answer on %s within %g s (%s sets how long to wait): %s",
                      settings.pod_resources_socket, settings.pod_resources_wait_s,
                      setting("--gpu-pod-resources-wait"), said)
            sys.exit(2)
        log.error("cannot tell this pod's GPUs, so none is reported (the GPU collector fails; ModelMesh's signals "
                  "are served): %s", said)
        return dataclasses.replace(settings, gpu_uuids=(), gpu_unattributed=(
            f"the kubelet's PodResources API could not be asked at {settings.pod_resources_socket} (the error at "
            "start says why and what to change)"))
    ids = pod_gpu_ids(pods, settings.pod_namespace, settings.pod_name)
    if ids is None:
        log.error("cannot tell this pod's GPUs, so none is reported (the GPU collector fails; ModelMesh's signals "
                  "are served): the kubelet lists no pod %s/%s: set %s and %s from the downward API's metadata.name "
                  "and metadata.namespace (%s and %s, where given, are taken before them: leave them out)",
                  settings.pod_namespace, settings.pod_name, setting("--pod-name"), setting("--pod-namespace"),
                  setting("--gpu-pod-name"), setting("--gpu-pod-namespace"))
        return dataclasses.replace(settings, gpu_uuids=(), gpu_unattributed=(
            f"the kubelet lists no pod {settings.pod_namespace}/{settings.pod_name} (the error at start says what "
            "to change)"))
    claimed = pod_claimed_gpus(pods, settings.pod_namespace, settings.pod_name)
    if claimed and not ids:
        # Which of the node's GPUs a claim's device is, NVML cannot say: report none as this pod's, as a failure.
        log.error("pod %s/%s has its GPUs through DRA claims (%s), which name no GPU UUID: no GPU of the node is "
                  "reported as this pod's, and the GPU collector fails; read GPU busy from NVIDIA's DCGM exporter "
                  "(the adapter's --gpu-source=dcgm)", settings.pod_namespace, settings.pod_name, ", ".join(claimed))
        return dataclasses.replace(settings, gpu_uuids=claimed)
    if not ids:
        log.info("the kubelet gave pod %s/%s no GPU: GPU collector off", settings.pod_namespace, settings.pod_name)
        return dataclasses.replace(settings, gpu_enabled=False)
    if gke_mig := [i for i in ids if GKE_MIG.fullmatch(i)]:
        # GKE names a MIG device by GPU instance; which of NVML's MIG devices that is, is not matched here.
        log.error("the kubelet names this pod's MIG devices as GKE's device plugin does (%s), by GPU instance: the "
                  "exporter does not match those to NVML's MIG devices, so the GPU collector fails (a MIG device has "
                  "no busy ratio of its own anyway); read GPU busy from NVIDIA's DCGM exporter (the adapter's "
                  "--gpu-source=dcgm) and turn this collector off (EXPORTER_NO_GPU=true, --no-gpu)", ", ".join(gke_mig))
    if indexes := [i for i in ids if not i.startswith(GPU_ID_PREFIXES) and not GKE_GPU.fullmatch(i)
                   and not GKE_MIG.fullmatch(i)]:
        # The device plugin's DEVICE_ID_STRATEGY=index: an index among the GPUs the plugin sees, which need not
        # be the sidecar's; guessing would report another pod's GPU as a success. Kept as configured: they fail.
        log.error("the kubelet names this pod's GPUs by index (%s), not by UUID: the NVIDIA device plugin runs with "
                  "DEVICE_ID_STRATEGY=index; set DEVICE_ID_STRATEGY=uuid (its default), or drop %s and give the "
                  "sidecar %s; until then the GPU collector fails", ", ".join(indexes),
                  setting("--gpu-pod-resources-socket"), setting("--gpu-uuids"))
    if usable := [i for i in ids if i not in gke_mig and i not in indexes]:
        # Only IDs a GPU can match: the ones the ERRORs above name never do, and were said to be reported.
        log.info("reporting the GPUs the kubelet gave this pod: %s", ", ".join(usable))
    if shared := pod_shared_gpus(pods, settings.pod_namespace, settings.pod_name):
        # NVML measures a whole GPU: the replica a pod holds has no utilization of its own.
        log.warning("GPU %s is shared by time-slicing or MPS (the kubelet gave this pod replicas of it): its busy "
                    "ratio is the whole GPU's, the other pods' work on it included, and every pod sharing it reports "
                    "the same, so scaling on it may add pods that relieve the GPU of nothing; to scale this runtime "
                    "on its requests instead, turn the GPU collector off (EXPORTER_NO_GPU=true, --no-gpu) and give "
                    "the runtime a target_rps_per_pod", ", ".join(shared))
    return dataclasses.replace(settings, gpu_uuids=ids)

