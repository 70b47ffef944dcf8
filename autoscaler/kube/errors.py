"""The one error hierarchy for everything the adapter asks of the Kubernetes API.

Every module in `autoscaler.kube` turns the library's exceptions (`kubernetes.aio`'s `OpenApiException` and
`ConfigException`, aiohttp's client errors, timeouts) and the API server's error `Status` objects into these,
with the library's exception chained as `__cause__`. Nothing outside this package catches a library exception:

- `KubeConfigError` (a `ValueError`): no usable connection settings. Raised at start-up; the CLI reports it in
  one line.
- `KubeApiError`: a call failed. `status` is the HTTP status when the server answered (None when it never did:
  connection refused, timeout, TLS), `reason` the Status `reason` (`NotFound`, `Conflict`, ...), and
  `retry_after_s` the server's `Retry-After`, so callers decide retry and backoff from one type.
- `WatchExpiredError`: the 410 that means "the resourceVersion is gone, list again".
"""

from __future__ import annotations


class KubeConfigError(ValueError):
    """No usable connection settings: the kubeconfig is missing or broken, or we are not in a cluster."""


class KubeApiError(Exception):
    """A Kubernetes API call failed; `status` is None when the server never answered."""

    def __init__(
        self, message: str, status: int | None = None, reason: str = "", retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s

    @property
    def cause(self) -> int | str:
        """What went wrong, for a log that says each cause once a minute (`exporter/log_limit.py`): the status code
        the server answered, else the kind of error the call met (`TimeoutError`, a connection error)."""
        return self.status if self.status is not None else type(self.__cause__ or self).__name__

    @property
    def retryable(self) -> bool:
        """Worth trying again later: no answer, a conflict, throttling or a server-side failure."""
        return self.status is None or self.status in (409, 429) or self.status >= 500


class WatchExpiredError(KubeApiError):
    """410: the resourceVersion to resume from is no longer retained; only a fresh list recovers."""
