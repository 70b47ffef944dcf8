"""Exponential backoff, the one formula every retrying part of the adapter uses, and the server's `Retry-After`.

Jitter depends on what must not synchronise: list + watch loops across replicas spread their delay ±20%
(`spread_delay`); the writers (deletion costs, the replica bridge), whose retries must not line up across pods
and objects, use "equal jitter" and honour the server's Retry-After (`retry_delay`).

A `Retry-After` (429 from API Priority and Fairness, some 503s) throttles the adapter's whole flow, not the one
object the call was about: `ServerThrottle` keeps every call of a part (the bridge, the deletion-cost writer,
the Lease elector) back until it has passed, instead of one doomed request per object.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from autoscaler.kube.errors import KubeApiError


def exponential_delay(failures: int, initial_s: float, cap_s: float) -> float:
    """`initial_s · 2^(failures-1)`, at most `cap_s`; `failures` counts the failures in a row, from 1."""
    return min(cap_s, initial_s * 2.0 ** min(max(failures, 1) - 1, 30))


def retry_delay(failures: int, initial_s: float, cap_s: float, draw: float, retry_after_s: float | None) -> float:
    """"Equal jitter": half of `exponential_delay` fixed, half spread by `draw` (uniform in [0, 1), from the
    caller's injectable random source); never sooner than the server's `Retry-After`."""
    delay = exponential_delay(failures, initial_s, cap_s)
    return max(delay / 2 + delay / 2 * draw, retry_after_s or 0.0)


UNANSWERED_MAX_S: Final = 4.0
"""The longest wait (before jitter) of a list + watch loop or a read after failures the API server never answered
(`unanswered`), where the owner's own cap is longer: pod discovery's 30 s cap, client-go's reflector's, had its
runtimes answer 503 for up to 36 s after the API server was back (20 to 27 s after a 40 s outage). Such a retry
costs the server nothing (no connection, or one it never answered), and one every 4 s from each loop of two
replicas is no load; an answered failure (a 5xx, a 403) still backs off to the owner's cap, counting the answered
failures in a row alone (`FailuresInARow`), and a 429's Retry-After is waited whatever this says."""


def unanswered(error: BaseException) -> bool:
    """Whether `error` is a Kubernetes API call the server never answered: connection refused or reset, a timeout,
    TLS, a stream dropped (`KubeApiError.status` None). Not an error of the adapter's own code."""
    return isinstance(error, KubeApiError) and error.status is None


@dataclass(slots=True)
class FailuresInARow:
    """A retrying part's failures in a row, and of them those the API server answered: what its backoff counts.

    A failure the server never answered (`unanswered`) backs off by all the failures in a row, to
    `UNANSWERED_MAX_S`; an answered one (a 5xx, a 429, a 409) by the answered failures in a row alone. The tries of
    an outage nobody answered say nothing of how loaded the server is: counted in, the 503 of an API server still
    starting at the end of a 40 s outage of refused connections waited the step those tries had doubled to (30 s,
    pod discovery's and the watches' cap; 33 s for the bridge's writes), where the first answered failure waits the
    base backoff. The one count of every loop that retries a Kubernetes call (`ListWatch`, the Deployment resync,
    the bridge's retries, the deletion-cost writes), so that none counts them its own way."""

    failures: int = 0
    """Every failure in a row, answered or not: what the logs and `on_failure` say."""
    answered: int = 0
    """Of `failures`, those the server answered."""

    def failed(self, *errors: BaseException) -> int:
        """Count one failed try, whose calls failed with `errors`; returns the n its backoff counts from 1:
        `failures` where the server answered none of them, `answered` where it answered any."""
        self.failures += 1
        if all(map(unanswered, errors)):
            return self.failures
        self.answered += 1
        return self.answered

    def reset(self) -> None:
        """A try worked: the next failure is the first in a row."""
        self.failures = self.answered = 0


def spread_delay(failures: int, initial_s: float, cap_s: float) -> float:
    """`exponential_delay` spread uniformly over ±20%, so replicas that lost the API server together do not
    come back to it in step."""
    return exponential_delay(failures, initial_s, cap_s) * (0.8 + 0.4 * random.random())


class ServerThrottle:
    """Until when the server asked a part to make no call (its `Retry-After`, at most `cap_s`)."""

    def __init__(self, cap_s: float = math.inf, clock: Callable[[], float] = time.monotonic) -> None:
        """`cap_s`: the longest wait honoured (a writer's longest backoff: a server asking for an hour must not
        stop writes for an hour). `clock`: monotonic seconds, injectable for tests."""
        self._cap_s = cap_s
        self._clock = clock
        self._until = -math.inf

    def note(self, error: KubeApiError) -> None:
        """Wait for `error`'s `Retry-After` as well as any earlier one: calls in flight together each bring
        their own answer, and the longest wait counts. An error without one changes nothing."""
        wait = self._wait(error)
        if wait is not None:
            self._until = max(self._until, self._clock() + wait)

    def replace(self, error: KubeApiError) -> None:
        """Wait for `error`'s `Retry-After` instead of any earlier one: for a part that makes one call at a time
        (the Lease elector), whose newest answer is the server's latest word. An error without one changes
        nothing."""
        wait = self._wait(error)
        if wait is not None:
            self._until = self._clock() + wait

    def clear(self) -> None:
        """A call went through: the server no longer throttles."""
        self._until = -math.inf

    def remaining(self) -> float:
        """Seconds until calls may go out again; 0 once they may."""
        return max(0.0, self._until - self._clock())

    def _wait(self, error: KubeApiError) -> float | None:
        if error.retry_after_s is None or error.retry_after_s <= 0:
            return None
        return min(error.retry_after_s, self._cap_s)
