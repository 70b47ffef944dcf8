"""Settings of `modelmesh-autoscaler serve`: one typed field per flag, each flag with an `AUTOSCALER_*`
environment twin. The flags themselves are `serve_options` (the table: each flag's converter, help and default);
`serve_args` reads flags and variables into `ServeSettings`. docs/configuration.md lists every flag and variable.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from autoscaler.serve_flag_values import REFRESH_INTERVAL_RANGE_S as REFRESH_INTERVAL_RANGE_S

# Re-exported: where the refresh interval's bounds were read from before the converters moved.
from autoscaler.sources.prometheus_deadline import round_deadline_s
from exporter.env_flags import Overridden

MIN_STALL_S: Final = 10.0
"""The shortest time without new values that counts as a stalled refresh (`ServeSettings.stalled_after_s`)."""


@dataclass(frozen=True, slots=True)
class ServeSettings:
    listen_host: str = ""
    """Empty: every address of both families, IPv4 and IPv6 (`--listen :6443`)."""
    listen_port: int = 6443
    insecure_dev: bool = False
    # TLS and authentication (docs/design.md, "What the adapter serves").
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    tls_service: str | None = None
    """The Service (`NAME.NAMESPACE`) the aggregator reaches the adapter through: its DNS names go into the
    generated certificate, so that an APIService's `caBundle` can pin it. None: `SHIPPED_SERVICE_NAME` in the
    adapter's own namespace (`autoscaler.serving_names`)."""
    requestheader_client_ca_file: Path | None = None
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ("X-Remote-User",)
    requestheader_group_headers: tuple[str, ...] = ("X-Remote-Group",)
    requestheader_extra_headers_prefix: tuple[str, ...] = ("X-Remote-Extra-",)
    client_ca_file: Path | None = None
    # k8s.io/apiserver's default: /metrics names every runtime with its values, so it is authorized
    # (`get` on nonResourceURL /metrics) like metrics-server's; adding it here opens it to anyone.
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/livez", "/readyz")
    kubeconfig: Path | None = None
    # Where the data comes from.
    source: Literal["scrape", "prometheus"] = "scrape"
    targets: Path | None = None
    prometheus_url: str | None = None
    gpu_source: Literal["exporter", "dcgm"] = "exporter"
    prometheus_ca_file: Path | None = None
    prometheus_token_file: Path | None = None
    prometheus_headers: tuple[tuple[str, str], ...] = ()
    prometheus_timeout_s: float = 5.0
    prometheus_namespace_label: str = "namespace"
    prometheus_pod_label: str = "pod"
    prometheus_series_selector: tuple[str, ...] = ()
    """PromQL label matchers every selector of the exporters' series carries (`prometheus_matchers`): the jobs
    trusted to write them."""
    dcgm_namespace_label: str = "namespace"
    dcgm_pod_label: str = "pod"
    exporter_port: int = 9187
    scrape_timeout_s: float = 5.0
    scrape_concurrency: int = 64
    exporter_ca_file: Path | None = None
    exporter_scheme: Literal["auto", "http", "https"] = "auto"
    """How discovered exporters are scraped: `auto` reads each pod's exporter port name (`https-exporter` from the
    TLS patch: https), so runtimes move to a TLS sidecar one pod at a time (docs/operations.md, Securing the
    exporters' port); `http` or `https` force one scheme, for pods that declare no ports."""
    exporter_server_name: str | None = None
    """The name the exporters' certificates are checked against, instead of the pod IP scraped (Prometheus's
    `tls_config.server_name`): certificates rarely carry a pod's IP, which changes with every pod."""
    exporter_client_cert_file: Path | None = None
    exporter_client_key_file: Path | None = None
    """The client certificate presented to exporters given `--tls-client-ca-file`; read again when it changes."""
    namespaces: tuple[str, ...] = ()
    # Decisions.
    refresh_interval_s: float = 15.0
    window_s: float = 30.0
    config: Path | None = None
    skew_order: float | None = None
    scale_down_tau_s: float | None = None
    max_staleness_s: float | None = None
    min_coverage: float | None = None
    # Acting on pods (docs/design.md, "Choosing the pod to remove").
    deletion_cost: bool = True
    leader_elect: bool | None = None
    leader_elect_lease_duration_s: float = 15.0
    leader_elect_renew_deadline_s: float = 10.0
    leader_elect_retry_period_s: float = 2.0
    leader_elect_namespace: str | None = None
    leader_elect_lease_name: str = "modelmesh-autoscaler"
    # The replica bridge (docs/design.md, "The RuntimeScale bridge"): None is on when runtimes are discovered
    # in Kubernetes (no --targets), off otherwise.
    bridge: bool | None = None
    log_level: str = "INFO"
    per_runtime_metrics: bool = True
    """The self-metric series of each runtime, pod and RuntimeScale on `/metrics` (`AdapterMetrics`): some
    50,000 at 5,000 runtimes, more than a Prometheus operator takes without a reason; off drops them."""
    # Serving (autoscaler.workers, autoscaler.api.connections).
    workers: int = 1
    refresh_nice: int = 10
    max_connections: int = 256
    header_read_timeout_s: float = 10.0
    keepalive_timeout_s: float = 60.0
    shutdown_delay_s: float = 0.0
    """After SIGTERM: /readyz fails and the workers keep serving this long before they close their port, so
    that connections endpoints still route here (they drop a terminating pod a moment later) are answered."""
    # Review caches and bounds (autoscaler.api.authn, autoscaler.api.authz), kube's delegated-auth defaults.
    token_cache_ttl_s: float = 10.0
    authorized_cache_ttl_s: float = 10.0
    unauthorized_cache_ttl_s: float = 10.0
    max_in_flight_reviews: int = 32
    given_by: tuple[tuple[str, str], ...] = ()
    """(dest, `flag --x` or `variable AUTOSCALER_X`) of each setting given, not left at its default: what a
    message about a setting names (the policy file replacing a flag set by a variable names the variable)."""
    overridden: tuple[Overridden, ...] = ()
    """The values given and replaced by another, so unused: an earlier flag of the same name, or a variable under
    its flag (`env_flags.overridden`); a message about the value in use names them (`autoscaler.preflight`)."""

    @property
    def bound_host(self) -> str:
        """The address the API really binds: `--insecure-dev` serves without authentication, so loopback only
        (the loopback address asked for, `::1` included, else 127.0.0.1)."""
        if self.insecure_dev and not is_loopback(self.listen_host):
            return "127.0.0.1"
        return self.listen_host

    @property
    def default_max_staleness_s(self) -> float:
        """The default policy's `max_staleness_s`: `--max-staleness`, else three refresh intervals."""
        return self.max_staleness_s or 3 * self.refresh_interval_s

    @property
    def source_deadline_s(self) -> float:
        """The longest one refresh waits on its metrics source: Prometheus's round deadline, two timeouts and a
        second (`sources.prometheus_reader`: a refused connection tried twice, an answer trickled to the end), or
        the scrape's, the refresh interval (`server.build_source`)."""
        if self.source == "prometheus":
            return round_deadline_s(self.prometheus_timeout_s)
        return self.refresh_interval_s

    @property
    def stalled_after_s(self) -> float:
        """How long the serving side waits for the refresh's next values before it calls the refresh stalled
        (`autoscaler.api.stall`): the age at which the adapter calls data stale (`--max-staleness`, default three
        refresh intervals), plus the longest a working refresh cycle takes: the interval, or the source's
        deadline when longer (a dead Prometheus's; the two timeouts alone, a second short of it, had a trickling
        Prometheus at a 0.2 s interval restart the pod); never under `MIN_STALL_S`, so that a very short interval
        on a busy node does not get a working pod restarted."""
        return max(MIN_STALL_S,
                   self.default_max_staleness_s + max(self.refresh_interval_s, self.source_deadline_s))

    @property
    def serving_url(self) -> str:
        """`https://HOST:PORT/` of the bound address, an IPv6 address in brackets, for the log."""
        host = f"[{self.bound_host}]" if ":" in self.bound_host else self.bound_host or "*"
        return f"https://{host}:{self.listen_port}"


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (127.0.0.0/8, ::1) or `localhost`."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
