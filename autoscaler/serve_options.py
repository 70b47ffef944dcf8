"""The flags of `modelmesh-autoscaler serve` (`OPTIONS`): each one's converter, help, default shown, group and
the `ServeSettings` field it sets, with its `AUTOSCALER_*` variable (`serve_args` reads them).

Flag names follow the Kubernetes extension-apiserver conventions where one exists (`--tls-cert-file`,
`--requestheader-*`, `--client-ca-file`, `--kubeconfig`, `--leader-elect*`) so operators can carry over what
they know from metrics-server and prometheus-adapter.
"""

from __future__ import annotations

from typing import Final

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.serve_flag_values import (
    connection_timeout,
    headers,
    label_matchers,
    label_name,
    leader_election_seconds,
    max_staleness,
    namespaces,
    niceness,
    object_name,
    prometheus_timeout,
    prometheus_url,
    refresh_interval,
    review_cache_ttl,
    scale_down_tau,
    scrape_timeout,
    server_name,
    service,
    shutdown_delay,
    token_file,
    window,
    workers,
)
from autoscaler.settings import ServeSettings
from exporter.env_flags import EnvFlag, namespace
from exporter.flag_values import (
    LOG_LEVELS,
    boolean,
    ca_file,
    choice,
    count,
    csv,
    file_path,
    fraction,
    host_port,
    order,
    port,
)

ENV_PREFIX: Final = "AUTOSCALER_"


class _Option(EnvFlag):
    __slots__ = ()
    env_prefix = ENV_PREFIX


_D: Final = ServeSettings()
_POLICY: Final = RuntimePolicy()
"""The built-in policy, whose values `--skew-order`, `--scale-down-tau` and `--min-coverage` show as defaults."""
_TLS: Final = "TLS and authentication"
_SOURCE: Final = "metrics source"
_DECIDE: Final = "decisions"
_ACT: Final = "pod deletion cost and leader election"
_SERVING: Final = "serving"


def _listed(values: tuple[str, ...]) -> str:
    return ",".join(values) if values else "empty"


def _is_on(value: str) -> bool:
    """An `{on,off}` flag's setting."""
    return value == "on"


def _is_true(value: str) -> bool:
    """A `{true,false}` flag's setting."""
    return value == "true"


OPTIONS: Final = (
    _Option("--listen", host_port, "address of the HTTPS API; no host (:6443) is every address of IPv4 and IPv6, "
            "0.0.0.0 IPv4's alone, [::] IPv6's alone", f"{_D.listen_host}:{_D.listen_port}", "HOST:PORT"),
    _Option("--insecure-dev", boolean, "local development only: no authentication or authorization, "
            "binds loopback only (the --listen host if it is loopback, ::1 included, else 127.0.0.1); never in a "
            "cluster", "off", switch=True, to_setting=bool),
    _Option("--log-level", choice(*LOG_LEVELS, upper=True), f"log level: {', '.join(LOG_LEVELS)}",
            _D.log_level, "LEVEL"),
    _Option("--per-runtime-metrics", choice("on", "off"), "expose the self-metric series of each runtime, pod "
            "and RuntimeScale on /metrics (10 per runtime of 2 pods); off keeps only the adapter-wide series",
            "on", "{on,off}", to_setting=_is_on),
    # TLS and authentication.
    _Option("--tls-cert-file", file_path, "serving certificate (PEM); goes with --tls-private-key-file",
            "a generated self-signed certificate", "FILE", _TLS),
    _Option("--tls-private-key-file", file_path, "private key of --tls-cert-file (PEM)", "none", "FILE", _TLS),
    _Option("--tls-service", service, "the Service the aggregator reaches the adapter through, NAME.NAMESPACE: "
            "without --tls-cert-file, the generated certificate names it (NAME.NAMESPACE.svc and "
            "NAME.NAMESPACE.svc.cluster.local), so that an APIService's caBundle can pin it",
            "modelmesh-autoscaler in the adapter's own namespace (modelmesh-autoscaler outside a cluster)",
            "NAME.NAMESPACE", _TLS),
    _Option("--requestheader-client-ca-file", file_path, "CA (PEM) that signs the aggregator's front-proxy "
            "client certificate", "read from kube-system/extension-apiserver-authentication in a cluster",
            "FILE", _TLS),
    _Option("--requestheader-allowed-names", csv, "comma list of front-proxy certificate CNs allowed to pass "
            "identity headers; empty: any CN the CA signed", _listed(_D.requestheader_allowed_names),
            "NAME,...", _TLS),
    _Option("--requestheader-username-headers", csv, "comma list of headers carrying the user name",
            _listed(_D.requestheader_username_headers), "HEADER,...", _TLS),
    _Option("--requestheader-group-headers", csv, "comma list of headers carrying the groups",
            _listed(_D.requestheader_group_headers), "HEADER,...", _TLS),
    _Option("--requestheader-extra-headers-prefix", csv, "comma list of header prefixes carrying extra user "
            "info", _listed(_D.requestheader_extra_headers_prefix), "PREFIX,...", _TLS),
    _Option("--client-ca-file", file_path, "CA (PEM) for client certificates: CN is the user, O the groups",
            "read from kube-system/extension-apiserver-authentication in a cluster", "FILE", _TLS),
    _Option("--authorization-always-allow-paths", csv, "comma list of paths served without authentication "
            "or authorization, as k8s.io/apiserver's flag (a leading / is optional, a trailing * matches a "
            "prefix, a * elsewhere is refused); resource requests (metric values, /keda and /debug/runtimes) are "
            "authorized even under a listed path; /metrics is authorized as get on the nonResourceURL /metrics "
            "unless listed here, which opens every runtime's name and values to anyone who reaches the port",
            _listed(_D.authorization_always_allow_paths), "PATH,...", _TLS),
    _Option("--authentication-token-webhook-cache-ttl", review_cache_ttl, "how long TokenReview answers (accepted "
            "and rejected) are cached (0.1 to 3600: a revoked token is taken this long)",
            f"{_D.token_cache_ttl_s:g} s", "SECONDS", _TLS, setting="token_cache_ttl_s"),
    _Option("--authorization-webhook-cache-authorized-ttl", review_cache_ttl, "how long allowed SubjectAccessReview "
            "answers are cached; keys in use are reviewed again in the background before they expire (0.1 to 3600: "
            "a removed RoleBinding still allows this long)",
            f"{_D.authorized_cache_ttl_s:g} s", "SECONDS", _TLS, setting="authorized_cache_ttl_s"),
    _Option("--authorization-webhook-cache-unauthorized-ttl", review_cache_ttl, "how long denied "
            "SubjectAccessReview answers are cached (0.1 to 3600: a new RoleBinding still denies this long)",
            f"{_D.unauthorized_cache_ttl_s:g} s", "SECONDS", _TLS,
            setting="unauthorized_cache_ttl_s"),
    _Option("--max-in-flight-reviews", count, "TokenReviews, and SubjectAccessReviews, in flight at once per "
            "serving process; a request that would start one more TokenReview, or more than its client address's "
            "share (a quarter), gets 429, SubjectAccessReviews wait their turn", str(_D.max_in_flight_reviews),
            "N", _TLS),
    _Option("--kubeconfig", file_path, "kubeconfig for the Kubernetes API",
            "in-cluster service account, else $KUBECONFIG or ~/.kube/config", "FILE", _TLS),
    # Serving.
    _Option("--workers", workers, "serving processes sharing the port (SO_REUSEPORT), fed pre-rendered answers "
            "by one refresh process; 0 runs refresh and serving in one process; at most 64", str(_D.workers), "N",
            _SERVING),
    _Option("--refresh-nice", niceness, "niceness the refresh process adds to its own (0-19), so that where "
            "cores are short the serving workers run first and a refresh takes longer instead",
            str(_D.refresh_nice), "N", _SERVING),
    _Option("--max-connections", count, "open connections per serving process; at the bound a new connection "
            "waits in line, before its TLS handshake, for a place freed by a refused or idle connection; each "
            "client address may hold a quarter of the places ahead of an address over its share",
            str(_D.max_connections), "N", _SERVING),
    _Option("--header-read-timeout", connection_timeout, "time allowed for the TLS handshake and for each "
            "request's headers (0.1 to 3600)", f"{_D.header_read_timeout_s:g} s", "SECONDS", _SERVING,
            setting="header_read_timeout_s"),
    _Option("--keepalive-timeout", connection_timeout, "idle time before a kept-alive connection is closed (0.1 to "
            "3600)",
            f"{_D.keepalive_timeout_s:g} s", "SECONDS", _SERVING, setting="keepalive_timeout_s"),
    _Option("--shutdown-delay", shutdown_delay, "after SIGTERM, how long /readyz fails while the workers still "
            "serve, so that the Service's endpoints drop the pod before its port closes; 0 closes at once; 0 to 300, "
            "and below the pod's terminationGracePeriodSeconds minus the rest of the stop (the Lease release, the "
            "workers' stop), else the kubelet kills it mid-way",
            f"{_D.shutdown_delay_s:g} s", "SECONDS", _SERVING, setting="shutdown_delay_s"),
    # Where the data comes from.
    _Option("--source", choice("scrape", "prometheus"), "scrape every exporter sidecar directly (no "
            "Prometheus needed) or query Prometheus", _D.source, "{scrape,prometheus}", _SOURCE),
    _Option("--targets", file_path, "static runtimes and exporter URLs (YAML) instead of discovering pods in "
            "Kubernetes", "discover in Kubernetes", "FILE", _SOURCE),
    _Option("--prometheus-url", prometheus_url, "Prometheus (or Thanos, Mimir) base URL; required by --source "
            "prometheus", "none", "URL", _SOURCE),
    _Option("--gpu-source", choice("exporter", "dcgm"), "GPU busy from the exporter sidecar, or from NVIDIA's "
            "DCGM exporter (DCGM_FI_DEV_GPU_UTIL, needs --source prometheus)", _D.gpu_source,
            "{exporter,dcgm}", _SOURCE),
    _Option("--prometheus-ca-file", ca_file, "CA bundle (PEM) that signs Prometheus's https certificate (the "
            "cluster's service CA for Thanos Querier on OpenShift); checked at start", "the system's CAs", "FILE",
            _SOURCE),
    _Option("--prometheus-token-file", token_file, "file holding a bearer token sent to Prometheus (a service "
            "account token, /var/run/secrets/kubernetes.io/serviceaccount/token); checked at start, read again "
            "when it changes, as the kubelet rotates it", "none", "FILE", _SOURCE),
    _Option("--prometheus-headers", headers, "HTTP headers sent with every query to Prometheus, as "
            "Name=Value,Name2=Value2 (X-Scope-OrgID=TENANT for Grafana Mimir or Cortex)", "none",
            "NAME=VALUE,...", _SOURCE),
    _Option("--prometheus-timeout", prometheus_timeout, "how long one query to Prometheus may take before the "
            "round is a timeout (values held, the HPA holds; 0.1 to 3600)",
            f"{_D.prometheus_timeout_s:g} s", "SECONDS", _SOURCE,
            setting="prometheus_timeout_s"),
    _Option("--prometheus-namespace-label", label_name, "label naming the pod's namespace on the exporters' series in "
            "Prometheus (--source prometheus): kubernetes_namespace with the classic kubernetes_sd_configs "
            "relabelling", _D.prometheus_namespace_label, "LABEL", _SOURCE),
    _Option("--prometheus-pod-label", label_name, "label naming the pod on the exporters' series in Prometheus: "
            "kubernetes_pod_name with the classic relabelling", _D.prometheus_pod_label, "LABEL", _SOURCE),
    _Option("--prometheus-series-selector", label_matchers, "PromQL label matchers added to every selector of the "
            "exporters' series the adapter sends (--source prometheus), as job=\"modelmesh-exporter\": only the "
            "jobs they match are trusted, so that a job keeping the labels its targets write (a Pushgateway, a "
            "PodMonitor with honorLabels) cannot write values for another namespace's pods", "none: every job's "
            "series", "MATCHERS", _SOURCE),
    _Option("--dcgm-pod-label", label_name, "label naming the pod on DCGM's series in Prometheus: exported_pod where "
            "Prometheus does not honor the DCGM exporter's labels", _D.dcgm_pod_label, "LABEL", _SOURCE),
    _Option("--dcgm-namespace-label", label_name, "label naming the pod's namespace on DCGM's series in Prometheus: "
            "exported_namespace where Prometheus does not honor the DCGM exporter's labels",
            _D.dcgm_namespace_label, "LABEL", _SOURCE),
    _Option("--exporter-port", port, "TCP port of the exporter sidecar on each runtime pod",
            str(_D.exporter_port), "PORT", _SOURCE),
    _Option("--scrape-timeout", scrape_timeout, "seconds to wait for one exporter before keeping its last sample "
            "(0.1 to 3600)",
            f"{_D.scrape_timeout_s:g} s", "SECONDS", _SOURCE, setting="scrape_timeout_s"),
    _Option("--scrape-concurrency", count, "number of exporters scraped at once",
            str(_D.scrape_concurrency), "N", _SOURCE),
    _Option("--exporter-ca-file", ca_file, "CA bundle (PEM) that signs the exporters' certificates, trusted "
            "for https exporter URLs instead of the system CAs", "the system CAs", "FILE", _SOURCE),
    _Option("--exporter-scheme", choice("auto", "http", "https"), "scheme of the discovered exporters' URLs: "
            "auto reads it from the name each pod declares the exporter port under (https or https-*, as the TLS "
            "sidecar patch's https-exporter: https://POD-IP:PORT/metrics, verified with --exporter-ca-file; any "
            "other name, or none: http); http or https: that one for every pod, whatever its ports' names",
            _D.exporter_scheme, "{auto,http,https}", _SOURCE),
    _Option("--exporter-server-name", server_name, "name the exporters' certificates are verified against instead "
            "of the pod IP scraped, which certificates rarely carry (Prometheus's tls_config server_name); also "
            "sent as the TLS server name", "the address scraped", "NAME", _SOURCE),
    _Option("--exporter-client-cert-file", file_path, "PEM client certificate presented to exporters given "
            "--tls-client-ca-file; read again when it changes (a renewed Secret); needs --exporter-client-key-file",
            "none", "FILE", _SOURCE),
    _Option("--exporter-client-key-file", file_path, "PEM private key of --exporter-client-cert-file", "none",
            "FILE", _SOURCE),
    _Option("--namespaces", namespaces, "comma list of namespaces to discover runtimes, watch HPAs, bridge "
            "RuntimeScales and write pod-deletion costs in (a policy-file runtime outside them is served from its "
            "pods only, with a warning), and, with --source prometheus, the pods the queries read; empty: all",
            "all namespaces", "NAMESPACE,...", _SOURCE),
    # Decisions.
    _Option("--refresh-interval", refresh_interval, "seconds between refreshes (read, aggregate, decide; 0.1 to 3600)",
            f"{_D.refresh_interval_s:g} s, the HPA's sync period", "SECONDS", _DECIDE, setting="refresh_interval_s"),
    _Option("--window", window, "aggregation window reported to the HPA, in seconds: the exporters' "
            "--load-window, and so the range it takes (0.1 to 3600)",
            f"{_D.window_s:g} s", "SECONDS", _DECIDE, setting="window_s"),
    _Option("--config", file_path, "policy YAML (`defaults:` and `runtimes:`, docs/configuration.md)",
            "built-in policy defaults", "FILE", _DECIDE),
    _Option("--skew-order", order, "power-mean order p over pods, at least 1 (1: plain mean); policy key "
            "skew_order for every runtime the config file or an annotation leaves unset", f"{_POLICY.skew_order:g}",
            "P", _DECIDE),
    _Option("--scale-down-tau", scale_down_tau, "seconds: time constant of the served values' fall (0 to 86400; 0: "
            "they fall at once); policy key scale_down_tau_s, as for --skew-order", f"{_POLICY.scale_down_tau_s:g} s",
            "SECONDS", _DECIDE, setting="scale_down_tau_s"),
    _Option("--max-staleness", max_staleness, "seconds after which a pod's signal counts as missing; policy key "
            "max_staleness_s, as for --skew-order (0.1 to 10800: three of the longest --refresh-interval; at least "
            "the exporters' --modelmesh-interval plus a refresh's reads, else signals go stale between reads)",
            "3 x --refresh-interval", "SECONDS", _DECIDE,
            setting="max_staleness_s"),
    _Option("--min-coverage", fraction, "ratio in (0, 1] of Ready pods with fresh data needed to serve a "
            "value (else 503); policy key min_coverage, as for --skew-order", f"{_POLICY.min_coverage:g}", "RATIO",
            _DECIDE),
    # Acting on pods.
    _Option("--deletion-cost", choice("on", "off"), "write controller.kubernetes.io/pod-deletion-cost on "
            "runtime pods", "on", "{on,off}", _ACT, to_setting=_is_on),
    _Option("--leader-elect", choice("true", "false"), "elect one writer of deletion costs through a Lease",
            "true in a cluster, false outside", "{true,false}", _ACT, to_setting=_is_true),
    _Option("--leader-elect-lease-duration", leader_election_seconds, "seconds a leader's Lease lasts (0.1 to 3600)",
            f"{_D.leader_elect_lease_duration_s:g} s", "SECONDS", _ACT, setting="leader_elect_lease_duration_s"),
    _Option("--leader-elect-renew-deadline", leader_election_seconds, "seconds the leader keeps trying to renew "
            "before giving up (0.1 to 3600)", f"{_D.leader_elect_renew_deadline_s:g} s", "SECONDS", _ACT,
            setting="leader_elect_renew_deadline_s"),
    _Option("--leader-elect-retry-period", leader_election_seconds, "seconds between attempts to acquire or renew "
            "(0.1 to 3600)",
            f"{_D.leader_elect_retry_period_s:g} s", "SECONDS", _ACT, setting="leader_elect_retry_period_s"),
    _Option("--leader-elect-namespace", namespace, "namespace of the Lease",
            "the adapter's own namespace", "NAMESPACE", _ACT),
    _Option("--leader-elect-lease-name", object_name, "name of the Lease", _D.leader_elect_lease_name, "NAME", _ACT),
    _Option("--bridge", choice("on", "off"), "as the leader, copy each RuntimeScale's spec.replicas (set by the "
            "HPA) into its ServingRuntime and report the runtime Deployment in the RuntimeScale's status",
            "on when runtimes are discovered in Kubernetes, off with --targets", "{on,off}", _ACT, to_setting=_is_on),
)
BY_DEST: Final = {option.dest: option for option in OPTIONS}
