"""What the adapter's long-lived Kubernetes loops tell its own metrics: each failure by its cause, and whether
each watch is open.

The pod watches (discovery), the HPA watches (the replica bounds), the RuntimeScale watches (the bridge's
wake-ups) and the Deployment resync retry for the adapter's whole life. When one keeps failing (a 403 after an
RBAC change, a 410 loop, an API server that drops the streams) only the log said so: only pod discovery had a
series (`discovery_healthy`). They now report through `LoopHealth` to a `WatchHealth` (`AdapterMetrics` is one):
`modelmesh_autoscaler_watch_failures_total{watch,reason}` and `modelmesh_autoscaler_watch_established{watch,
namespace}`.

The causes are a fixed few (`FailureReason`), from `KubeApiError`'s status as the loops already tell them apart
(`KubeApiError.retryable`, the 404 the bridge names a missing CRD, the 410 that lists again): never the message,
so the counter's series stay bounded whatever the API server answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from autoscaler.kube.errors import KubeApiError, WatchExpiredError


class Watched(StrEnum):
    """Which loop: the `watch` label."""

    PODS = "pods"
    HPAS = "hpas"
    RUNTIME_SCALES = "runtimescales"
    DEPLOYMENTS = "deployments"
    """The resync of runtime Deployments: read on a timer, not watched, so it has no `established` series (its
    state is `discovery_healthy`'s)."""


class FailureReason(StrEnum):
    """Why one list, watch or read failed: the `reason` label."""

    FORBIDDEN = "forbidden"
    """401 or 403: the adapter's credentials refused, or its (Cluster)Role without list or watch on the resource."""
    REFUSED = "refused"
    """Another 4xx: 404 (for RuntimeScales, the CRD not installed), 400, 422; retrying does not help."""
    THROTTLED = "throttled"
    """429: API Priority and Fairness; the loop waits the server's Retry-After."""
    SERVER_ERROR = "server_error"
    """5xx: the API server (or what is in front of it) failing; often a control-plane upgrade."""
    NO_ANSWER = "no_answer"
    """No status: connection refused, a timeout, TLS, or a stream dropped mid-watch; or very short watches (ended
    within a second with nothing in it, from the second in a row on: a proxy closing streams, `list_watch`)."""
    EXPIRED = "expired"
    """410: the resourceVersion is no longer retained, so the loop lists again; now and then is normal (the
    watch cache moved on), many a minute is a loop."""
    UNEXPECTED = "unexpected"
    """Not the API's failure but the adapter's own code's: a bug, said with its traceback in the log."""


def failure_reason(error: BaseException) -> FailureReason:
    """The cause of one failure, from the status the API server answered (or none)."""
    if isinstance(error, WatchExpiredError):
        return FailureReason.EXPIRED
    if not isinstance(error, KubeApiError):
        return FailureReason.UNEXPECTED
    status = error.status
    if status is None:
        return FailureReason.NO_ANSWER
    if status in (401, 403):
        return FailureReason.FORBIDDEN
    if status == 410:
        return FailureReason.EXPIRED
    if status == 429:
        return FailureReason.THROTTLED
    if status >= 500:
        return FailureReason.SERVER_ERROR
    return FailureReason.REFUSED


class WatchHealth(Protocol):
    """Where the loops report (`autoscaler.selfmetrics.AdapterMetrics`). `scope` is a namespace, None for all."""

    def watch_started(self, watch: Watched, scope: str | None) -> None: ...

    def watch_failed(self, watch: Watched, reason: FailureReason) -> None: ...

    def watch_established(self, watch: Watched, scope: str | None, established: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class LoopHealth:
    """One loop's reports: which loop it is (`watch`), and to whom (`to`)."""

    to: WatchHealth
    watch: Watched

    def started(self, scope: str | None) -> None:
        """The loop of `scope` runs: every cause counted from 0, and not established until it is."""
        self.to.watch_started(self.watch, scope)

    def failed(self, error: BaseException) -> None:
        self.to.watch_failed(self.watch, failure_reason(error))

    def established(self, scope: str | None, established: bool) -> None:
        self.to.watch_established(self.watch, scope, established)
