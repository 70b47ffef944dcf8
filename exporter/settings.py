"""The exporter's settings: one typed field per flag, each flag with an `EXPORTER_*` environment twin.

Sidecars are configured from a pod spec, where environment variables are easier to template than
arguments; both work and a flag wins over its variable. A variable is checked exactly like its flag, and a
bad value of either is an argparse error (exit status 2) that names the flag or the variable, never a
traceback at start-up or a silently ignored setting. The values only this program takes, and how each is
refused, are `sidecar_flag_values`; those both programs take, `flag_values`.
"""

from __future__ import annotations

import argparse
import operator
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, NoReturn

from exporter import env_flags
from exporter.env_flags import EnvFlag, EnvFlagError, Overridden, overridden, resolve_flags, settings_fields
from exporter.flag_values import (
    LOG_LEVELS,
    SECONDS_FORMS,
    boolean,
    ca_file,
    count,
    file_path,
    host_port,
    log_level,
    metrics_url,
)
from exporter.pod_identity import PodIdentity
from exporter.pod_resources import DEFAULT_SOCKET
from exporter.sidecar_flag_values import (
    gpu_interval,
    gpu_window,
    load_window,
    model_recency_horizon,
    modelmesh_interval,
    modelmesh_timeout,
    pod_name,
    pod_resources_wait,
    pod_uid,
    uuid_list,
)
from exporter.tls_files import pair_problem
from exporter.version_flag import VersionFlag

ENV_PREFIX: Final = "EXPORTER_"

MAX_CONNECTIONS: Final = 32
"""Default cap on open connections (`exporter.connection_cap`): a Prometheus pair, the adapter's scrapes (one
connection per serving process and replica) and the kubelet's probes need a handful; 32 answers of a
3,000-model fleet held at once are about 25 MB. Here, not with the cap, whose module loads prometheus_client
and asyncio: `--help` and a refused flag need neither."""


@dataclass(frozen=True, slots=True)
class ExporterSettings:
    """What the exporter runs with; the defaults are what a ModelMesh runtime pod needs."""

    listen_host: str = ""
    """Address for /metrics and /healthz. Empty: every address, IPv4 and IPv6, so Prometheus, the adapter and the
    kubelet's probe reach the pod at its address whichever family the cluster gives pods (0.0.0.0 is IPv4's
    only)."""
    listen_port: int = 9187
    """9187: the exporter's port in the manifests and the adapter's `--exporter-port` default."""
    max_connections: int = MAX_CONNECTIONS
    """Connections open at once (`exporter.connection_cap`): each may hold a rendered answer while its client reads."""
    modelmesh_url: str = "https://127.0.0.1:2112/metrics"
    """ModelMesh serves its metrics on :2112 over https by default, and the `mm` container shares our
    network namespace, so 127.0.0.1."""
    modelmesh_insecure: bool = False
    """Skip certificate verification: never by default, ModelMesh's self-signed certificate needs a CA file."""
    modelmesh_ca_file: Path | None = None
    modelmesh_timeout_s: float = 2.0
    """Seconds one ModelMesh scrape may take: ModelMesh answers in milliseconds, so 2 s is a hung container,
    and it stays well inside the 5 s interval."""
    modelmesh_interval_s: float = 5.0
    """Seconds between ModelMesh scrapes: six points per 30 s load window, at negligible cost."""
    load_window_s: float = 30.0
    """Seconds over which rates are computed: two HPA sync periods, smooth enough not to chase noise."""
    model_recency_horizon_s: float = 3600.0
    """Seconds a model stays in the per-model recency series after this pod last served it (0: off). An hour
    covers the adapter's `target_lru_age_s` (600 s by default) with room, and bounds the series to the models
    served in the last hour where ModelMesh's own per-model series grow for the container's life."""
    gpu_enabled: bool = True
    gpu_uuids: tuple[str, ...] = ()
    """GPUs to report; empty means every GPU visible to the sidecar."""
    pod_resources_socket: Path | None = None
    """The kubelet's PodResources socket: report only the GPUs the kubelet allocated to this pod (off: None)."""
    gpu_unattributed: str | None = None
    """Why this pod's GPUs could not be told (the kubelet's PodResources API could not be asked): the GPU
    collector then samples nothing and fails with this, rather than report other pods' GPUs. Set at start-up,
    never by a flag."""
    pod_resources_wait_s: float = 30.0
    """Seconds the start waits for a kubelet that may answer in a moment (restarting: its socket is gone, or
    nobody listens on it yet) before it stops with status 2 for the container's restart to ask again. 30 s
    covers a kubelet restart and stays inside the sidecar's liveness probe (first after 10 s, killed after
    three failures 30 s apart); a node whose kubelet takes longer to come back needs more."""
    pod_name: str | None = None
    pod_namespace: str | None = None
    """This pod, as the PodResources API names it (the downward API's metadata.name and metadata.namespace):
    `--gpu-pod-name`/`--gpu-pod-namespace`, which default to `--pod-name`/`--pod-namespace` (one fact, one setting
    in the sidecar patch; the older ones kept for sidecars patched before)."""
    identity: PodIdentity = PodIdentity()  # noqa: RUF009 (a tuple: immutable, one shared default is right)
    """The pod this sidecar runs in (downward API), published as `modelmesh_exporter_pod_info` so that the adapter,
    which scrapes by pod IP, can tell an answer from another pod that was given the IP; nothing is published when
    none of it is given, and such an exporter is read as before."""
    gpu_window_s: float = 10.0
    """Seconds of NVML utilization samples averaged into the busy ratio (`gpu_window` in docs/design.md)."""
    gpu_interval_s: float = 1.0
    """Seconds between NVML reads; NVML's sample buffer covers several seconds, so none is missed."""
    tls_cert_file: Path | None = None
    """The certificate /metrics and /healthz are served with over HTTPS (None: plain HTTP, as before). Reloaded
    when it changes (`exporter.cert_reload`): cert-manager renews it, the kubelet swaps the Secret's files."""
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None
    """Where given, /metrics answers only clients whose certificate chains to this CA (`exporter.metrics_tls`)."""
    log_level: str = "INFO"
    overridden: tuple[Overridden, ...] = ()
    """The values given and replaced by another (an earlier flag of the name, a variable under its flag), which
    argparse drops without a word: named at start (`exporter.startup.serve`)."""


def setting(flag: str, value: str = "") -> str:
    """A flag as an error names it: with its `EXPORTER_*` twin, which is what a sidecar's manifest sets and so
    what its operator searches for (`--load-window (EXPORTER_LOAD_WINDOW)`); with `value`, the variable's
    (`--modelmesh-insecure (EXPORTER_MODELMESH_INSECURE=true)`)."""
    variable = ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()
    return f"{flag} ({variable}={value})" if value else f"{flag} ({variable})"


class _Option(EnvFlag):
    __slots__ = ()
    env_prefix = ENV_PREFIX


_D: Final = ExporterSettings()
_OPTIONS: Final = (
    _Option("--listen", host_port, "address to serve /metrics and /healthz on; no host (:9187) is every "
            "address, IPv4 and IPv6, as a pod's address may be either; 0.0.0.0 is IPv4's only",
            f"{_D.listen_host}:{_D.listen_port}", "HOST:PORT"),
    _Option("--max-connections", count, "connections open at once; at the bound a new one takes the place of one "
            "whose client stopped reading or that has no request to answer, or waits for one (10 s at most, in a line "
            "of four times the bound) (each may hold a rendered /metrics answer; a client that reads none of its "
            "answer for 10 s is dropped anyway)",
            str(_D.max_connections), "N"),
    _Option("--modelmesh-url", metrics_url,
            "this pod's ModelMesh container's metrics URL; ModelMesh serves https by default. Its host must be an "
            "address of this pod (loopback, or one of its interfaces), as an IP or localhost, else the exporter "
            "does not start: a Service (modelmesh-serving's port 2112) spreads the reads over every runtime pod, "
            "and each read of another pod would count that pod's whole history as load", _D.modelmesh_url, "URL"),
    _Option("--modelmesh-insecure", boolean, "do not verify ModelMesh's https certificate: needed for "
            "ModelMesh's own metrics port, which serves a self-signed certificate it makes anew at every start "
            "(the request stays inside the pod)", "off", switch=True, to_setting=bool),
    _Option("--modelmesh-ca-file", ca_file, "PEM CA bundle that signs the https certificate of what serves "
            "--modelmesh-url (a proxy of yours in front of ModelMesh; ModelMesh's own certificate cannot be "
            "verified)", "the system's CAs", "FILE"),
    _Option("--modelmesh-timeout", modelmesh_timeout, "seconds to wait for one ModelMesh scrape before counting "
            "a timeout and keeping the last values (0.1 to 3600)", f"{_D.modelmesh_timeout_s:g} s",
            "SECONDS", setting="modelmesh_timeout_s"),
    _Option("--modelmesh-interval", modelmesh_interval, "seconds between ModelMesh scrapes (0.1 to 3600)",
            f"{_D.modelmesh_interval_s:g} s", "SECONDS", setting="modelmesh_interval_s"),
    _Option("--load-window", load_window, "seconds over which requests/s, mean queue delay and cache misses/s "
            "are computed (0.1 to 3600); at least --modelmesh-interval", f"{_D.load_window_s:g} s", "SECONDS",
            setting="load_window_s"),
    _Option("--model-recency-horizon", model_recency_horizon, "with ModelMesh's per-model metrics on "
            "(MM_METRICS=prometheus:...;per_model_metrics=true), the exporter publishes per model when this pod "
            "last served it (modelmesh_pod_model_last_served_timestamp_seconds{model_id}); a model not served for "
            "longer than this many seconds is left out, so the output holds the models served recently, not every "
            "model the pod ever served (0 to 604800, a week). At least the adapter's target_lru_age_s, and at least "
            "--modelmesh-interval", f"{_D.model_recency_horizon_s:g} s; 0: off", "SECONDS",
            setting="model_recency_horizon_s"),
    _Option("--no-gpu", boolean, "turn the GPU collector off (CPU-only runtimes)", "GPU on", switch=True,
            setting="gpu_enabled", to_setting=operator.not_),
    _Option("--gpu-uuids", uuid_list, "comma-separated GPU UUIDs to report, as nvidia-smi -L prints them (a GPU's "
            "UUID includes its MIG devices; not NVIDIA_VISIBLE_DEVICES's all, none or indexes)",
            "every GPU visible to this container", "UUID,..."),
    _Option("--gpu-pod-resources-socket", file_path, "the kubelet's PodResources socket (hostPath "
            f"{DEFAULT_SOCKET}): report only the GPUs the kubelet gave this pod; needs "
            "--pod-name and --pod-namespace and the grpcio package", "off", "SOCKET", setting="pod_resources_socket"),
    _Option("--gpu-pod-resources-wait", pod_resources_wait, "seconds to wait at start for a kubelet that does not "
            "answer on --gpu-pod-resources-socket yet (restarting) before stopping with status 2, for the container's "
            "restart to ask again (0.1 to 600; past the sidecar's liveness probe, raise the probe with it)",
            f"{_D.pod_resources_wait_s:g} s", "SECONDS", setting="pod_resources_wait_s"),
    _Option("--gpu-pod-name", str, "this pod's name for --gpu-pod-resources-socket; kept for sidecars patched "
            "before --pod-name, which it defaults to (give --pod-name alone; both, different, are refused)",
            "--pod-name", "NAME"),
    _Option("--gpu-pod-namespace", env_flags.namespace, "this pod's namespace for --gpu-pod-resources-socket; "
            "kept for sidecars patched before --pod-namespace, which it defaults to (give --pod-namespace alone; "
            "both, different, are refused)", "--pod-namespace", "NAMESPACE"),
    _Option("--gpu-window", gpu_window, "seconds of NVML utilization samples averaged into the busy ratio (0.1 to "
            "3600)",
            f"{_D.gpu_window_s:g} s", "SECONDS", setting="gpu_window_s"),
    _Option("--gpu-interval", gpu_interval, "seconds between NVML reads (in the background, never inside a "
            "scrape; 0.1 to 3600)", f"{_D.gpu_interval_s:g} s", "SECONDS", setting="gpu_interval_s"),
    _Option("--pod-name", pod_name, "this pod's name (downward API metadata.name), published with its namespace "
            "and uid as modelmesh_exporter_pod_info: the adapter, which scrapes by pod IP, refuses an answer that "
            "names another pod (the IP given again to a new pod while the old one is still listed)", "none", "NAME"),
    _Option("--pod-namespace", env_flags.namespace, "this pod's namespace (downward API metadata.namespace), for "
            "modelmesh_exporter_pod_info", "none", "NAMESPACE"),
    _Option("--pod-uid", pod_uid, "this pod's uid (downward API metadata.uid), for modelmesh_exporter_pod_info: "
            "what tells this pod from a pod created again under its name", "none", "UID"),
    _Option("--tls-cert-file", file_path, "PEM certificate (with its chain) to serve /metrics and /healthz over "
            "HTTPS with, instead of plain HTTP; read again when it changes (a renewed Secret); the kubelet's probes "
            "then need scheme: HTTPS; needs --tls-key-file", "plain HTTP", "FILE"),
    _Option("--tls-key-file", file_path, "PEM private key of --tls-cert-file", "none", "FILE"),
    _Option("--tls-client-ca-file", ca_file, "PEM CA bundle: /metrics answers only clients presenting a certificate "
            "it signs (Prometheus's tls_config cert_file, the adapter's --exporter-client-cert-file); others are "
            "refused in the handshake (a certificate it did not sign) or with 401 (none); /healthz stays open for "
            "the kubelet's probes, which send none; read again when it changes (a rotated CA); needs --tls-cert-file",
            "no client certificate asked",
            "FILE"),
    _Option("--log-level", log_level, f"log level: {', '.join(LOG_LEVELS)}", _D.log_level, "LEVEL"),
)
_BY_DEST: Final = {option.dest: option for option in _OPTIONS}


def flag_of(dest: str) -> str:
    """The flag of the setting `dest`, as a warning about a value given for it names it."""
    return _BY_DEST[dest].flag
_PLACED_BY_HAND: Final = frozenset({"listen", "gpu_pod_name", "gpu_pod_namespace", "pod_name", "pod_namespace",
                                    "pod_uid"})
"""The flags `parse_settings` places itself: `--listen` in two fields, this pod's facts checked together
(`_one_pod_fact`) and gathered in its identity; every other flag lands where its `_Option` says."""
_GROUPS: Final = {"--pod-": "This pod (downward API)",
                   "--modelmesh": "ModelMesh", "--load": "ModelMesh", "--model-": "ModelMesh", "--gpu": "GPU (NVML)",
                   "--no-gpu": "GPU (NVML)", "--tls": "TLS (serving /metrics and /healthz)"}


class _SidecarParser(argparse.ArgumentParser):
    """A value refused is one line, `modelmesh-exporter: error: ...`, and status 2: in a sidecar's log argparse's
    usage (14 lines) came first and buried the line that matters. A flag it does not know still shows the usage,
    to find the right one."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            self.refuse(message)
        super().error(message)

    def refuse(self, message: str) -> NoReturn:
        """One line naming what to fix, status 2 (a bad variable, or flags that contradict each other)."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> _SidecarParser:
    """The `modelmesh-exporter` parser. Defaults are None here: `parse_settings` fills in each unset flag
    from its variable, then from `ExporterSettings`, so `--help` shows the real default, not the environment."""
    parser = _SidecarParser(
        prog="modelmesh-exporter",
        description=(
            "Per-pod sidecar for KServe ModelMesh runtimes: samples the GPU through NVML and the local "
            "ModelMesh container's own metrics in the background, and publishes per-pod load, queue and "
            "cache metrics in the Prometheus text format at /metrics (liveness at /healthz). Every flag "
            "can also be set with the environment variable shown with it; a flag wins over its variable; a "
            "switch's variable takes true/false, and its off form (--no-modelmesh-insecure, --gpu for --no-gpu) "
            f"turns it off. SECONDS is {SECONDS_FORMS}."
        ),
    )
    parser.add_argument("--version", action=VersionFlag)
    env_flags.add_flags(parser, _OPTIONS, _group_of)
    return parser


def _group_of(option: EnvFlag) -> str | None:
    """The `--help` group of an exporter flag, found by its name's start (`_GROUPS`)."""
    return next((title for prefix, title in _GROUPS.items() if option.flag.startswith(prefix)), None)


def parse_settings(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> ExporterSettings:
    """Flags, then `EXPORTER_*` variables, then defaults; a bad value exits with status 2 and says why."""
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    try:
        values = resolve_flags(_BY_DEST.values(), args, os.environ if environ is None else environ)
    except EnvFlagError as error:
        parser.refuse(str(error))
    if values.get("modelmesh_insecure") and values.get("modelmesh_ca_file") is not None:
        parser.refuse(f"{setting('--modelmesh-insecure')} and {setting('--modelmesh-ca-file')} contradict each "
                     "other: verify with the CA file, or not at all")
    _check_serving_tls(parser, values)
    gpu_pod_name = _one_pod_fact(parser, values, "name")
    gpu_pod_namespace = _one_pod_fact(parser, values, "namespace")
    # With --no-gpu the socket is not used (`startup.unused_gpu_settings` warns): nothing it needs is missing.
    if values.get("gpu_pod_resources_socket") is not None and not values.get("no_gpu"):
        if not (gpu_pod_name and gpu_pod_namespace):
            parser.refuse(f"{setting('--gpu-pod-resources-socket')} needs {setting('--pod-name')} and "
                         f"{setting('--pod-namespace')}, from the downward API's metadata.name and "
                         "metadata.namespace (the sidecar patch sets them): they name this pod to the kubelet")
        if values.get("gpu_uuids"):
            parser.refuse(f"{setting('--gpu-pod-resources-socket')} and {setting('--gpu-uuids')} both choose the "
                         "GPUs: use one")
    listen = values.get("listen", (_D.listen_host, _D.listen_port))
    interval = values.get("modelmesh_interval", _D.modelmesh_interval_s)
    window = values.get("load_window", _D.load_window_s)
    if window < interval:
        parser.refuse(f"{setting('--load-window')} is {window:g} s: it must be at least "
                     f"{setting('--modelmesh-interval')}, {interval:g} s: a rate needs two reads")
    horizon = values.get("model_recency_horizon", _D.model_recency_horizon_s)
    if 0 < horizon < interval:
        parser.refuse(f"{setting('--model-recency-horizon')} is {horizon:g} s: it must be 0 (off) or at least "
                     f"{setting('--modelmesh-interval')}, {interval:g} s: a model served between two reads would be "
                     "left out at the next one")
    return replace(
        _D, **settings_fields(_OPTIONS, values, by_hand=_PLACED_BY_HAND), listen_host=listen[0], listen_port=listen[1],
        pod_name=gpu_pod_name, pod_namespace=gpu_pod_namespace,
        identity=PodIdentity(values.get("pod_namespace"), values.get("pod_name"), values.get("pod_uid")),
        overridden=tuple(overridden(_BY_DEST.values(), args, os.environ if environ is None else environ)),
    )


def _check_serving_tls(parser: _SidecarParser, values: Mapping[str, object]) -> None:
    """The serving certificate and its key come together and load, or the start stops naming the setting and the
    file: a sidecar that fell back to plain HTTP would be refused by every scraper configured for HTTPS, and say
    nothing of why; one that crash-loops on a traceback hides which of the two files is wrong."""
    cert, key = values.get("tls_cert_file"), values.get("tls_key_file")
    if (cert is None) != (key is None):
        given, missing = ("--tls-cert-file", "--tls-key-file") if key is None else ("--tls-key-file", "--tls-cert-file")
        parser.refuse(f"{setting(given)} needs {setting(missing)}: the certificate and its private key, as a "
                      "kubernetes.io/tls Secret's tls.crt and tls.key")
    if values.get("tls_client_ca_file") is not None and cert is None:
        parser.refuse(f"{setting('--tls-client-ca-file')} needs {setting('--tls-cert-file')} and "
                      f"{setting('--tls-key-file')}: client certificates are asked for over HTTPS only")
    if (isinstance(cert, Path) and isinstance(key, Path)
            and (problem := pair_problem(cert, key, setting("--tls-cert-file"), setting("--tls-key-file")))):
        parser.refuse(problem)


def _one_pod_fact(parser: _SidecarParser, values: Mapping[str, object], fact: str) -> str | None:
    """This pod's `fact` ("name" or "namespace") as the kubelet is asked about it: `--gpu-pod-<fact>`, kept for
    sidecars patched before `--pod-<fact>` existed, else `--pod-<fact>`, the one setting the sidecar patch now
    gives. Both given and different are refused: the kubelet would be asked about one pod while
    `modelmesh_exporter_pod_info` names another."""
    older, newer = values.get(f"gpu_pod_{fact}"), values.get(f"pod_{fact}")
    if older is not None and newer is not None and older != newer:
        parser.refuse(f"{setting(f'--gpu-pod-{fact}')} is {older!r} and {setting(f'--pod-{fact}')} is {newer!r}: "
                     f"both are this pod's {fact}; leave out {setting(f'--gpu-pod-{fact}')}, which defaults to "
                     f"{setting(f'--pod-{fact}')}")
    chosen = older if older is not None else newer
    return chosen if isinstance(chosen, str) else None


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The `EXPORTER_*` variables no flag reads, each as a warning (`env_flags.unknown_variables`)."""
    return env_flags.unknown_variables(_OPTIONS, os.environ if environ is None else environ, ENV_PREFIX)
