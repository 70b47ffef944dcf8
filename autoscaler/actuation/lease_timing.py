"""The three durations of leader election (`LeaseConfig`, client-go's), what they must satisfy, and the client
timeout they leave every Kubernetes call of an elected replica (`client_timeout_s`).

The safety margin is `lease_duration - renew_deadline`, and every delay is counted against it, never for it
(`autoscaler.actuation.leader` counts them):
- the leader's deadline runs from when its last successful attempt *started* (its write may have landed at
  any moment after that; a slow answer must not extend its term), and `is_leader` turns false at that
  deadline by the clock, whenever the loop gets to notice;
- a follower stamps a record it reads with the time the read *returned* (the record may have changed just
  before the server answered);
- every Kubernetes call has a client timeout shorter than the margin (`client_timeout_s`), so a write the
  old leader sent just before its deadline has finished or been abandoned before anyone may take over.
- When the leader dies, a follower takes over one lease duration after it first saw the last renewal, at its
  next retry: 15-24 s after that renewal at the defaults (each of the two waits is up to one jittered retry
  period, 2.2 x 2 s).

Apart from the elector, and importing the standard library alone: `serve`'s start-up checks and the stop budget
use these without the Kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

JITTER_FACTOR: Final = 1.2  # client-go's JitterFactor for acquire retries
DEFAULT_CLIENT_TIMEOUT_S: Final = 5.0


def client_timeout_s(lease_duration_s: float, renew_deadline_s: float,
                     default_s: float = DEFAULT_CLIENT_TIMEOUT_S) -> float:
    """The timeout for every Kubernetes call of an elected replica: at most half the safety margin
    `lease_duration - renew_deadline` (2.5 s at the defaults 15 and 10), so that no call the old leader made
    is still in flight when a follower may take over."""
    margin = lease_duration_s - renew_deadline_s
    return min(default_s, margin / 2) if margin > 0 else default_s


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Which Lease, who we are, and the three durations of client-go (seconds)."""

    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    """How long followers wait, after the record last changed, before taking the Lease over."""
    renew_deadline_s: float = 10.0
    """How long the leader keeps trying to renew before it gives leadership up."""
    retry_period_s: float = 2.0
    """Time between attempts to acquire or renew."""

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.retry_period_s > 0:
            raise ValueError("--leader-elect-retry-period must be greater than 0")
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")
        if not self.renew_deadline_s > JITTER_FACTOR * self.retry_period_s:
            raise ValueError("--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period")
