"""Settings of `modelmesh-autoscaler serve`: one typed field per flag.

Flag names follow the Kubernetes extension-apiserver conventions where one exists (`--tls-cert-file`,
`--requestheader-*`, `--client-ca-file`, `--kubeconfig`, `--leader-elect*`) so operators can carry over what
they know from metrics-server and prometheus-adapter.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exporter.settings import host_port


@dataclass(frozen=True, slots=True)
class ServeSettings:
    listen_host: str = "0.0.0.0"
    listen_port: int = 6443
    insecure_dev: bool = False
    # TLS and authentication (DESIGN §4).
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    requestheader_client_ca_file: Path | None = None
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ("X-Remote-User",)
    requestheader_group_headers: tuple[str, ...] = ("X-Remote-Group",)
    requestheader_extra_headers_prefix: tuple[str, ...] = ("X-Remote-Extra-",)
    client_ca_file: Path | None = None
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/livez", "/readyz", "/metrics")
    kubeconfig: Path | None = None
    # Where the data comes from.
    source: Literal["scrape", "prometheus"] = "scrape"
    targets: Path | None = None
    prometheus_url: str | None = None
    gpu_source: Literal["exporter", "dcgm"] = "exporter"
    exporter_port: int = 9187
    scrape_timeout_s: float = 5.0
    scrape_concurrency: int = 64
    namespaces: tuple[str, ...] = ()
    # Decisions.
    refresh_interval_s: float = 15.0
    window_s: float = 30.0
    config: Path | None = None
    skew_order: float | None = None
    scale_down_tau_s: float | None = None
    max_staleness_s: float | None = None
    min_coverage: float | None = None
    # Acting on pods (DESIGN §7).
    deletion_cost: bool = True
    leader_elect: bool | None = None
    leader_elect_lease_duration_s: float = 15.0
    leader_elect_renew_deadline_s: float = 10.0
    leader_elect_retry_period_s: float = 2.0
    leader_elect_namespace: str | None = None
    leader_elect_lease_name: str = "modelmesh-autoscaler"
    log_level: str = "INFO"
    # Serving (autoscaler.workers, autoscaler.api.connections).
    workers: int = 1
    max_connections: int = 1000
    header_read_timeout_s: float = 10.0
    keepalive_timeout_s: float = 60.0
    # Review caches and bounds (autoscaler.api.authn, autoscaler.api.authz), kube's delegated-auth defaults.
    token_cache_ttl_s: float = 10.0
    authorized_cache_ttl_s: float = 10.0
    unauthorized_cache_ttl_s: float = 10.0
    max_in_flight_reviews: int = 32


def positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from error
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return number


def fraction(value: str) -> float:
    number = positive(value)
    if number > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return number


def duration(value: str) -> float:
    """Seconds, as a number or a Go duration of one unit as kube's flags take it (`10s`, `2m`, `500ms`)."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    text = value.strip()
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return positive(text[: -len(suffix)]) * units[suffix]
    return positive(text)


def count(value: str) -> int:
    try:
        number = int(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from error
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    d = ServeSettings()
    parser.add_argument("--listen", type=host_port, default=(d.listen_host, d.listen_port),
                        help="HOST:PORT for the HTTPS API (default 0.0.0.0:6443)")
    parser.add_argument("--insecure-dev", action="store_true",
                        help="local development only: no authentication or authorization, binds 127.0.0.1 only")
    parser.add_argument("--log-level", default=d.log_level, choices=["DEBUG", "INFO", "WARNING", "ERROR"])

    tls = parser.add_argument_group("TLS and authentication")
    tls.add_argument("--tls-cert-file", type=Path, help="serving certificate (PEM); self-signed when omitted")
    tls.add_argument("--tls-private-key-file", type=Path, help="key of --tls-cert-file (PEM)")
    tls.add_argument("--requestheader-client-ca-file", type=Path,
                     help="CA that signs the aggregator's front-proxy client certificate; in a cluster, read "
                          "from kube-system/extension-apiserver-authentication when omitted")
    tls.add_argument("--requestheader-allowed-names", type=csv, default=d.requestheader_allowed_names,
                     help="comma list of front-proxy certificate CNs allowed to pass identity headers; empty: any")
    tls.add_argument("--requestheader-username-headers", type=csv, default=d.requestheader_username_headers,
                     help="headers carrying the user name (default X-Remote-User)")
    tls.add_argument("--requestheader-group-headers", type=csv, default=d.requestheader_group_headers,
                     help="headers carrying groups (default X-Remote-Group)")
    tls.add_argument("--requestheader-extra-headers-prefix", type=csv,
                     default=d.requestheader_extra_headers_prefix,
                     help="header prefixes carrying extra user info (default X-Remote-Extra-)")
    tls.add_argument("--client-ca-file", type=Path,
                     help="CA for client certificates: CN is the user, O the groups")
    tls.add_argument("--authorization-always-allow-paths", type=csv, default=d.authorization_always_allow_paths,
                     help="paths served without authentication (default /healthz,/livez,/readyz,/metrics)")
    tls.add_argument("--kubeconfig", type=Path,
                     help="kubeconfig for the Kubernetes API; in-cluster configuration when omitted")

    tls.add_argument("--authentication-token-webhook-cache-ttl", type=duration, default=d.token_cache_ttl_s,
                     help="how long TokenReview answers are cached (default 10s)")
    tls.add_argument("--authorization-webhook-cache-authorized-ttl", type=duration,
                     default=d.authorized_cache_ttl_s, help="how long allowed SubjectAccessReviews are cached "
                                                             "(default 10s)")
    tls.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=duration,
                     default=d.unauthorized_cache_ttl_s, help="how long denied SubjectAccessReviews are cached "
                                                               "(default 10s)")
    tls.add_argument("--max-in-flight-reviews", type=count, default=d.max_in_flight_reviews,
                     help="TokenReviews and SubjectAccessReviews in flight at once, each kind, per serving "
                          "process; requests beyond it are refused (401, 500) rather than queued (default 32)")

    serving = parser.add_argument_group("serving")
    serving.add_argument("--workers", type=int, default=d.workers,
                         help="serving processes sharing the port (SO_REUSEPORT), fed by one refresh process; "
                              "0 runs everything in one process (default 1)")
    serving.add_argument("--max-connections", type=count, default=d.max_connections,
                         help="open connections per serving process; more are closed at once (default 1000)")
    serving.add_argument("--header-read-timeout", type=duration, default=d.header_read_timeout_s,
                         help="time for the TLS handshake and for each request's headers (default 10s)")
    serving.add_argument("--keepalive-timeout", type=duration, default=d.keepalive_timeout_s,
                         help="idle time before a kept-alive connection is closed (default 60s)")

    source = parser.add_argument_group("metrics source")
    source.add_argument("--source", choices=["scrape", "prometheus"], default=d.source,
                        help="scrape every exporter directly (default, no Prometheus needed) or query Prometheus")
    source.add_argument("--targets", type=Path,
                        help="static runtimes and exporter URLs (YAML) instead of discovering pods in Kubernetes")
    source.add_argument("--prometheus-url", help="Prometheus (or Thanos/Mimir) base URL for --source prometheus")
    source.add_argument("--gpu-source", choices=["exporter", "dcgm"], default=d.gpu_source,
                        help="GPU busy from our exporter or from NVIDIA's DCGM exporter (prometheus source)")
    source.add_argument("--exporter-port", type=int, default=d.exporter_port,
                        help="port of the exporter sidecar on each pod (default 9187)")
    source.add_argument("--scrape-timeout", type=positive, default=d.scrape_timeout_s,
                        help="seconds to wait for one exporter (default 5)")
    source.add_argument("--scrape-concurrency", type=int, default=d.scrape_concurrency,
                        help="exporters scraped at once (default 64)")
    source.add_argument("--namespaces", type=csv, default=d.namespaces,
                        help="comma list of namespaces to discover runtimes in; empty: all")

    decide = parser.add_argument_group("decisions")
    decide.add_argument("--refresh-interval", type=positive, default=d.refresh_interval_s,
                        help="seconds between refreshes (default 15, the HPA's sync period)")
    decide.add_argument("--window", type=positive, default=d.window_s,
                        help="aggregation window reported to the HPA, in seconds: the exporters' load window "
                             "(default 30)")
    decide.add_argument("--config", type=Path, help="policy YAML (DESIGN §6): defaults and per-runtime targets")
    decide.add_argument("--skew-order", type=positive, help="power-mean order p over pods (default 2)")
    decide.add_argument("--scale-down-tau", type=positive,
                        help="seconds: time constant of the served values' fall (default 300)")
    decide.add_argument("--max-staleness", type=positive,
                        help="seconds after which a pod's data is missing (default 3 x refresh interval)")
    decide.add_argument("--min-coverage", type=fraction,
                        help="fraction of Ready pods with fresh data needed to serve at all (default 0.5)")

    act = parser.add_argument_group("pod deletion cost and leader election")
    act.add_argument("--deletion-cost", choices=["on", "off"], default="on",
                     help="write controller.kubernetes.io/pod-deletion-cost on runtime pods (default on)")
    act.add_argument("--leader-elect", choices=["true", "false"],
                     help="elect one writer through a Lease (default: true in a cluster, false otherwise)")
    act.add_argument("--leader-elect-lease-duration", type=positive, default=d.leader_elect_lease_duration_s,
                     help="seconds a leader's lease lasts (default 15)")
    act.add_argument("--leader-elect-renew-deadline", type=positive, default=d.leader_elect_renew_deadline_s,
                     help="seconds the leader keeps trying to renew before giving up (default 10)")
    act.add_argument("--leader-elect-retry-period", type=positive, default=d.leader_elect_retry_period_s,
                     help="seconds between attempts to acquire or renew (default 2)")
    act.add_argument("--leader-elect-namespace", help="namespace of the Lease (default: the pod's namespace)")
    act.add_argument("--leader-elect-lease-name", default=d.leader_elect_lease_name,
                     help="name of the Lease (default modelmesh-autoscaler)")


def settings_from_args(args: argparse.Namespace) -> ServeSettings:
    host, port = args.listen
    return ServeSettings(
        listen_host=host,
        listen_port=port,
        insecure_dev=args.insecure_dev,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        requestheader_client_ca_file=args.requestheader_client_ca_file,
        requestheader_allowed_names=args.requestheader_allowed_names,
        requestheader_username_headers=args.requestheader_username_headers,
        requestheader_group_headers=args.requestheader_group_headers,
        requestheader_extra_headers_prefix=args.requestheader_extra_headers_prefix,
        client_ca_file=args.client_ca_file,
        authorization_always_allow_paths=args.authorization_always_allow_paths,
        kubeconfig=args.kubeconfig,
        source=args.source,
        targets=args.targets,
        prometheus_url=args.prometheus_url,
        gpu_source=args.gpu_source,
        exporter_port=args.exporter_port,
        scrape_timeout_s=args.scrape_timeout,
        scrape_concurrency=args.scrape_concurrency,
        namespaces=args.namespaces,
        refresh_interval_s=args.refresh_interval,
        window_s=args.window,
        config=args.config,
        skew_order=args.skew_order,
        scale_down_tau_s=args.scale_down_tau,
        max_staleness_s=args.max_staleness,
        min_coverage=args.min_coverage,
        deletion_cost=args.deletion_cost == "on",
        leader_elect=None if args.leader_elect is None else args.leader_elect == "true",
        leader_elect_lease_duration_s=args.leader_elect_lease_duration,
        leader_elect_renew_deadline_s=args.leader_elect_renew_deadline,
        leader_elect_retry_period_s=args.leader_elect_retry_period,
        leader_elect_namespace=args.leader_elect_namespace,
        leader_elect_lease_name=args.leader_elect_lease_name,
        log_level=args.log_level,
        workers=args.workers,
        max_connections=args.max_connections,
        header_read_timeout_s=args.header_read_timeout,
        keepalive_timeout_s=args.keepalive_timeout,
        token_cache_ttl_s=args.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl_s=args.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl_s=args.authorization_webhook_cache_unauthorized_ttl,
        max_in_flight_reviews=args.max_in_flight_reviews,
    )
