"""Which pods the scrape source tries this refresh, and in what order.

A pod whose exporter failed slowly is tried again only after an exponential backoff (`kube.backoff`), so a lost
node's black-holed pods cost a connect timeout now and then instead of one every refresh; one that failed at
once (a refused connection: an exporter restarting; a quick 500) costs nothing to try again and is tried at
every refresh, so a runtime whose exporters come back is read at the next refresh, not a minute later (its values
answered 503 for want of coverage all that time); and pods that are not failing go first, so with the
concurrency bound and the refresh deadline (`scrape.ScrapeSource`) a crowd of dead pods cannot keep a healthy one
from being read. Times are the refresh's own clock (`collect(now)`),
so tests step it instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from autoscaler.kube.backoff import exponential_delay
from exporter.names import REASON_TIMEOUT

BACKOFF_INITIAL_S = 5.0
"""A pod that failed once is retried at the next refresh (15 s) anyway; only a streak spaces the tries."""
BACKOFF_MAX_S = 60.0
"""A pod whose failures take time and that comes back is read again within a minute: four default refreshes,
inside `max_staleness` for the runtime's other pods, and short next to the scale-down time constant."""
CHEAP_FAILURE_S = 1.0
"""A failure that took less than this is not backed off: it held a concurrency slot for under a second (a refused
connection takes a round trip), where a timeout holds one for the whole `--scrape-timeout` (5 s)."""


def fails_cheaply(reason: str, cost_s: float, cheap_failure_s: float = CHEAP_FAILURE_S) -> bool:
    """Whether a failure is tried again at the next refresh: quick, and not a timeout. A timeout is never cheap,
    however short: a hung exporter cut off by a `--scrape-timeout` under a second, or by the refresh's deadline
    just after its scrape began, would hold a slot at every refresh (a reviewer's)."""
    return reason != REASON_TIMEOUT and cost_s < cheap_failure_s


@dataclass(slots=True)
class _Streak:
    failures: int
    retry_at: float


class ScrapeRetries:
    """Failure streaks per pod (any hashable key), the time each failing pod is due again."""

    def __init__(self, initial_s: float = BACKOFF_INITIAL_S, max_s: float = BACKOFF_MAX_S,
                 cheap_failure_s: float = CHEAP_FAILURE_S) -> None:
        self._initial_s = initial_s
        self._max_s = max_s
        self._cheap_failure_s = cheap_failure_s
        self._streaks: dict[Hashable, _Streak] = {}

    def due(self, pod: Hashable, now: float) -> bool:
        streak = self._streaks.get(pod)
        return streak is None or now >= streak.retry_at

    def failures(self, pod: Hashable) -> int:
        streak = self._streaks.get(pod)
        return 0 if streak is None else streak.failures

    def failed(self, pod: Hashable, now: float, reason: str, cost_s: float) -> int:
        """Record a failure at `now` for `reason` that took `cost_s`; the streak length, 1 for a pod that was fine.
        The streak counts cheap failures too (the pod goes after the healthy ones), but only a costly one waits."""
        failures = self.failures(pod) + 1
        cheap = fails_cheaply(reason, cost_s, self._cheap_failure_s)
        wait = 0.0 if cheap else exponential_delay(failures, self._initial_s, self._max_s)
        self._streaks[pod] = _Streak(failures, now + wait)
        return failures

    def succeeded(self, pod: Hashable) -> bool:
        """Record a success; True when it ends a failure streak."""
        return self._streaks.pop(pod, None) is not None

    def forget_all_but(self, known: Iterable[Hashable]) -> None:
        keep = set(known)
        for pod in [pod for pod in self._streaks if pod not in keep]:
            del self._streaks[pod]
