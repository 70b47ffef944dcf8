"""The values only `serve`'s flags take (worker counts, PromQL label names and matchers, Prometheus's URL, HTTP
headers, namespace and object names, a certificate's DNS name), each checked by one converter that raises
`argparse.ArgumentTypeError`, as the values both programs take are in `exporter.flag_values`: apart from
`autoscaler.serve_options`, which keeps what the flags are (the option table), so that a reader of
either finds one job.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Final

from autoscaler.policies.policy_values import MAX_STALENESS_RANGE_S, SCALE_DOWN_TAU_RANGE_S
from autoscaler.sources.prometheus_matchers import LABEL_NAME, parse_matchers
from exporter.flag_values import (
    LOAD_WINDOW_RANGE_S,
    csv,
    file_path,
    metrics_url,
    seconds_from_zero,
    seconds_within,
    text,
    whole_number_within,
    without_password,
)
from exporter.kube_names import DNS_SUBDOMAIN, NAMESPACE_RULE, namespace_problem, object_name_problem

MAX_WORKERS: Final = 64
"""The most serving processes `--workers` starts: one per core the pod may use is the most that helps, and each
adds about 35 MiB of memory; `--workers 100000` (a zero too many) forked them 20 a second until memory ran out."""


def workers(value: str) -> int:
    """0 (everything in one process) to `MAX_WORKERS` serving processes."""
    return whole_number_within(value, 0, MAX_WORKERS, f"0 to {MAX_WORKERS}")


REFRESH_INTERVAL_RANGE_S: Final = (0.1, 3600.0)
"""The refresh intervals taken: a millisecond (a slip of unit) refreshed without pause and logged each time that
the adapter was starved of CPU; 1e20 never refreshed after the first."""


refresh_interval = seconds_within(*REFRESH_INTERVAL_RANGE_S)
"""Seconds between refreshes, within `REFRESH_INTERVAL_RANGE_S`."""


TIMEOUT_RANGE_S: Final = REFRESH_INTERVAL_RANGE_S
"""The timeouts taken (`--scrape-timeout`, `--header-read-timeout`, `--keepalive-timeout`), as the refresh
interval's: `--scrape-timeout 1e9` or `--keepalive-timeout 1e12` (a slip of unit or of zeros) was taken and waited
for ever; below a tenth of a second every scrape, handshake or kept-alive connection fails or closes at once."""

scrape_timeout = seconds_within(*TIMEOUT_RANGE_S)
"""Seconds to wait for one exporter, within `TIMEOUT_RANGE_S`."""

connection_timeout = seconds_within(*TIMEOUT_RANGE_S)
"""Seconds a serving connection may wait (headers, idle kept-alive), within `TIMEOUT_RANGE_S`."""

prometheus_timeout = seconds_within(*TIMEOUT_RANGE_S)
"""Seconds one query to Prometheus may take, within `TIMEOUT_RANGE_S`: `--prometheus-timeout 1e12` waited for ever
on a Prometheus that stopped answering, and put off the /healthz stall check (twice the timeout) as long."""


REVIEW_CACHE_TTL_RANGE_S: Final = (0.1, 3600.0)
"""The TokenReview and SubjectAccessReview cache TTLs taken: a cached answer outlives a revoked token or a removed
RoleBinding by up to its TTL, and `--authorization-webhook-cache-authorized-ttl 1e12` (a slip of zeros) let them
read metrics until the adapter restarted. An hour is already far beyond kube-apiserver's own defaults (2 and 5
minutes, 30 s for a denial); below a tenth of a second nothing is reused and each request costs a review (0, no
cache, was never taken)."""

review_cache_ttl = seconds_within(*REVIEW_CACHE_TTL_RANGE_S)
"""Seconds a review's answer is cached, within `REVIEW_CACHE_TTL_RANGE_S`."""


WINDOW_RANGE_S: Final = LOAD_WINDOW_RANGE_S
"""The windows taken: `--window` reports the exporters' `--load-window` to the HPA, so any load window an exporter
takes, and no other: `--window 1e300` was served in every answer as a 301-digit `window`, which no int64 holds."""

window = seconds_within(*WINDOW_RANGE_S)
"""Seconds of the reported aggregation window, within `WINDOW_RANGE_S`."""

max_staleness = seconds_within(*MAX_STALENESS_RANGE_S)
"""Seconds after which a pod's signal counts as missing, within `MAX_STALENESS_RANGE_S` (the policy key's)."""

scale_down_tau = seconds_within(*SCALE_DOWN_TAU_RANGE_S, read=seconds_from_zero)
"""Seconds of the served values' time constant of fall, within `SCALE_DOWN_TAU_RANGE_S` (the policy key's; 0: at
once)."""


LEADER_ELECTION_RANGE_S: Final = (0.1, 3600.0)
"""The leader election's three durations taken (`--leader-elect-lease-duration`, `-renew-deadline`,
`-retry-period`). `--leader-elect-lease-duration 1e300` (or 3e9) was taken, and the API server refused every
attempt to create the Lease (400: its leaseDurationSeconds is an int32), so no replica ever led and no deletion cost
was written. An hour is already far beyond kube's own 15, 10 and 2 s: a leader that died is taken over only after
its lease duration, and writes nothing meanwhile. From a tenth of a second, the shortest interval of the others."""

leader_election_seconds = seconds_within(*LEADER_ELECTION_RANGE_S)
"""Seconds of a Lease's duration, renew deadline or retry period, within `LEADER_ELECTION_RANGE_S`."""


SHUTDOWN_DELAY_RANGE_S: Final = (0.0, 300.0)
"""The shutdown delays taken: `--shutdown-delay 1e12` absorbed the kubelet's SIGTERM and served on until SIGKILL, at
the pod's terminationGracePeriodSeconds (30 s in the shipped Deployment), with nothing said. The Service's endpoints
drop a stopping pod within seconds; five minutes is already far beyond what any grace period is set for, and the
delay must in any case stay below the pod's terminationGracePeriodSeconds minus the rest of the stop."""

shutdown_delay = seconds_within(*SHUTDOWN_DELAY_RANGE_S, read=seconds_from_zero)
"""Seconds of serving on after SIGTERM, within `SHUTDOWN_DELAY_RANGE_S` (0: none)."""


def niceness(value: str) -> int:
    """A niceness increment for the refresh process: 0 (none) to 19 (the lowest priority)."""
    return whole_number_within(value, 0, 19, "0 to 19")


def token_file(value: str) -> Path:
    """A file holding a bearer token, read now: a wrong path or an empty file (a Secret key not set) otherwise
    started the adapter, which then failed every refresh with 401s or the same error while the HPA held. It is
    read again at each refresh (the kubelet rotates projected tokens); this checks only that it is usable now."""
    path = file_path(value)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise argparse.ArgumentTypeError(f"cannot read a token from '{path}': {reason}") from error
    if not token:
        raise argparse.ArgumentTypeError(f"cannot read a token from '{path}': the file is empty")
    return path


def label_name(value: str) -> str:
    """A label name as PromQL takes it unquoted in `by (...)` and matchers: another one would fail every query
    with Prometheus's "parse error", which names no flag."""
    name = value.strip()
    if not LABEL_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"expected a Prometheus label name (letters, digits and _, not starting with a digit), got {value!r}")
    return name


def label_matchers(value: str) -> tuple[str, ...]:
    """PromQL label matchers (`job="modelmesh-exporter"`), checked as Prometheus would parse them: a typo would
    fail every refresh with Prometheus's "parse error", which names no flag."""
    try:
        return parse_matchers(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected PromQL label matchers, got {value!r}: {error}") from None


def prometheus_url(value: str) -> str:
    """Prometheus's base URL: the queries add /api/v1/query, so a URL that ends in /api/v1 (as the HTTP API's
    documentation writes it) would ask .../api/v1/api/v1/query and get a 404 at every refresh."""
    url = metrics_url(value).rstrip("/")
    for suffix in ("/api/v1/query", "/api/v1"):
        if url.endswith(suffix):
            raise argparse.ArgumentTypeError(
                f"give Prometheus's base URL, without {suffix}: {without_password(url.removesuffix(suffix))}; "
                f"got {without_password(value)!r}")
    return metrics_url(value)


_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name (RFC 9110's `token`)."""


def headers(value: str) -> tuple[tuple[str, str], ...]:
    """`Name=Value,Name2=Value2`: HTTP headers; a value may hold `=` (split at the first) but not `,`."""
    pairs = []
    for item in csv(value):
        name, equals, header_value = item.partition("=")
        name = name.strip()
        if not equals or not _HEADER_NAME.fullmatch(name):
            # Only the start: a header's value is often a token (`Authorization: Bearer ...` from a Secret).
            start = re.split(r"[:=\s]", item, maxsplit=1)[0]
            raise argparse.ArgumentTypeError(f"expected Name=Value pairs separated by commas, got an item "
                                             f"beginning {start!r} (the rest not shown: it may be a secret)")
        pairs.append((name, header_value.strip()))
    return tuple(pairs)


def namespaces(value: str) -> tuple[str, ...]:
    """A `csv` of namespace names, each checked as `namespace` checks one."""
    names = csv(value)
    if any(namespace_problem(name) is not None for name in names):
        raise argparse.ArgumentTypeError(f"expected namespace names ({NAMESPACE_RULE} each), got {value!r}")
    return names


def service(value: str) -> str:
    """A Service as `NAME.NAMESPACE` (each a DNS label), whose DNS names a generated certificate carries."""
    name, dot, namespace = text(value).partition(".")
    if not dot or namespace_problem(name) is not None or namespace_problem(namespace) is not None:
        raise argparse.ArgumentTypeError(f"expected NAME.NAMESPACE, a Service's name and namespace ({NAMESPACE_RULE} "
                                         f"each), got {value!r}")
    return f"{name}.{namespace}"


def object_name(value: str) -> str:
    """An object name (a DNS-1123 subdomain), such as the Lease's: the API server refuses to create another."""
    name = text(value)
    if (rule := object_name_problem(name)) is not None:
        raise argparse.ArgumentTypeError(f"expected an object name ({rule}), got {value!r}")
    return name


def server_name(value: str) -> str:
    """A DNS name a certificate carries, as `--exporter-server-name` checks the exporters' against: an IP or a
    URL there would match no DNS subject alternative name, and every scrape would fail."""
    name = text(value).lower()
    if not DNS_SUBDOMAIN.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"expected a DNS name as the exporters' certificates carry it (lower-case letters, digits, '-' and '.', "
            f"as modelmesh-exporter or modelmesh-exporter.modelmesh-serving.svc), got {value!r}")
    return name
