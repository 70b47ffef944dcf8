"""When the replica bridge tries a RuntimeScale again after a failed reconcile, and when it wakes up for it.

A module of its own because the schedule is easy to get wrong: 409, 429, 5xx and no answer are retried with
exponential backoff and jitter (`autoscaler.kube.backoff.retry_delay`), other refusals (403: RBAC) at the next
resync. A failure the server never answered (refused, timed out) backs off to about 4 s only
(`backoff.UNANSWERED_MAX_S`, as the watches), so a write lands within seconds of an outage's end; an answered one to
the 60 s cap, counting only the answered failures in a row. A RuntimeScale the watch hands over during a failure's
backoff (the HPA wrote again) waits for its retry too (`holds`): its retry's pass reads the newest ask; after a
refusal it goes out. A retry waits at least half its backoff, counted from the start of the pass that failed, and
the first one due starts a pass that takes every one whose half has passed: each retry due on its own started a pass
of three fleet-wide lists for it alone, back to back while an outage failed every write. A server's `Retry-After`
(`ServerThrottle`) holds the whole bridge, so the next pass waits for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, KeysView
from dataclasses import dataclass, field

from autoscaler.actuation.bridge_owners import ScaleId
from autoscaler.kube.backoff import (
    UNANSWERED_MAX_S,
    FailuresInARow,
    ServerThrottle,
    exponential_delay,
    retry_delay,
    unanswered,
)
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON


@dataclass(slots=True)
class _Retry:
    in_a_row: FailuresInARow = field(default_factory=FailuresInARow)
    """The failures in a row, and those the server answered (409, 429, 5xx): an answered failure backs off by these
    alone (a 503 at an outage's end waited 30 to 60 s, the cap, where the first answered failure waits 1 s)."""
    retry_at: float = 0.0
    """When this retry wakes the bridge (jittered)."""
    not_before: float = 0.0
    """From when a pass retries it: half its backoff (or the server's Retry-After) after the pass that failed."""
    uid: str | None = None
    """The RuntimeScale object's `metadata.uid`: one deleted and created again under its name is another object,
    which neither waits for nor is held by this retry."""
    holds_asks: bool = False
    """Whether a new ask waits for this retry: after a failure (the server may still be failing), not a refusal
    (a webhook that refused one ask says nothing of the next)."""


class RetrySchedule:
    """The RuntimeScales to try again, each with its failures in a row and when it is due."""

    def __init__(self, throttle: ServerThrottle, *, backoff_base_s: float, backoff_cap_s: float,
                 resync_interval_s: float, clock: Callable[[], float], rand: Callable[[], float]) -> None:
        """`throttle`: the bridge's, which every failure's `Retry-After` extends and the next pass waits for."""
        self._throttle = throttle
        self._base_s, self._cap_s, self._resync_s = backoff_base_s, backoff_cap_s, resync_interval_s
        self._clock = clock
        self._rand = rand
        self._retries: dict[ScaleId, _Retry] = {}
        self._passed_at = -math.inf  # when the last full pass started: retries due by then were looked at
        self._started_at = -math.inf  # when the pass (full or of the changed) now running started
        self._resynced_at = clock()  # when the last full pass ended: the resync counts from there

    def pass_started(self, *, full: bool) -> None:
        """A pass starts now: failures in it count their backoff from here; a `full` one looks at every retry."""
        self._started_at = self._clock()
        if full:
            self._passed_at = self._started_at

    def full_pass_ended(self) -> None:
        """A full pass ended now (or found nothing to do: not leading, held by the server): the next resync is
        due a resync interval from here, whatever hand-overs wake the bridge meanwhile."""
        self._resynced_at = self._clock()

    def failed(self, key: ScaleId, scale: JSON, error: KubeApiError) -> float:
        """Schedule the retry of RuntimeScale `scale`; returns the seconds until it. Counted from the start of the
        pass, so that the retries of one pass share their earliest moment and go out in one pass
        (`next_pass_in_s`)."""
        retry = self._retry(key, scale) or self._retries.setdefault(key, _Retry(uid=_uid(scale)))
        failures = retry.in_a_row.failed(error)
        now = self._clock()
        self._throttle.note(error)
        retry.holds_asks = error.retryable
        if error.retryable:
            start = self._started_at if -math.inf < self._started_at <= now else now
            # A try the server never answered (refused, timed out) costs it nothing: retried within about 4 s, as
            # the watches' are, so that a write lands within seconds of an outage's end, not at a backoff that
            # doubled to its cap through the outage.
            cap_s = min(self._cap_s, UNANSWERED_MAX_S) if unanswered(error) else self._cap_s
            retry.retry_at = start + retry_delay(failures, self._base_s, cap_s, self._rand(), error.retry_after_s)
            retry.not_before = start + max(exponential_delay(failures, self._base_s, cap_s) / 2,
                                           error.retry_after_s or 0.0)
        else:
            retry.retry_at = retry.not_before = now + self._resync_s
        return max(0.0, retry.retry_at - now)

    def forget(self, key: ScaleId) -> None:
        """No retry of `key`: it went through, or the RuntimeScale is gone."""
        self._retries.pop(key, None)

    def clear(self) -> None:
        """No retry at all: this replica stopped leading."""
        self._retries.clear()

    def keys(self) -> KeysView[ScaleId]:
        """The RuntimeScales with a retry scheduled."""
        return self._retries.keys()

    def _retry(self, key: ScaleId, scale: JSON) -> _Retry | None:
        """The retry of `key` if it is `scale`'s object's: one of an object deleted since (another uid) is
        forgotten. A RuntimeScale created again after an outage waited for its predecessor's backoff (up to 60
        s), each new ask held for it."""
        retry = self._retries.get(key)
        if retry is not None and retry.uid != _uid(scale):
            del self._retries[key]
            return None
        return retry

    def waits(self, key: ScaleId, scale: JSON) -> bool:
        """Whether a pass leaves RuntimeScale `scale` alone for now: less than half its backoff has passed."""
        retry = self._retry(key, scale)
        return retry is not None and retry.not_before > self._clock()

    def holds(self, key: ScaleId, scale: JSON) -> bool:
        """Whether a hand-over of `key` waits for its retry (which wakes a pass that reads it anew) rather than
        going out now: a new ask while its backoff runs would go to a server that just failed it, and each
        failure counts, so an HPA writing every 0.5 s through an 8 s outage climbed the backoff to its cap. A
        refusal (403, an admission webhook's 4xx) holds none: it says nothing of the next ask, which would
        otherwise wait for the resync."""
        retry = self._retry(key, scale)
        return retry is not None and retry.holds_asks and retry.retry_at > self._clock()

    def first_retried(self, key: ScaleId, error: KubeApiError) -> bool:
        """Whether `error` is a retried failure (no answer, 409, 429, 5xx) with none before it in a row: not yet
        worth a status, one 409 or 503 retried a second later would flap Ready."""
        earlier = self._retries.get(key)
        return error.retryable and (earlier is None or earlier.in_a_row.failures == 0)

    def next_pass_in_s(self) -> float:
        """Seconds until the next full pass: the end of the server's `Retry-After` while one holds the bridge;
        else the resync or the next retry the last pass did not look at (one due by then was tried, or its scope
        could not be listed, which the resync or a watch event tries again: not in a tight loop).

        The resync counts from the end of the last full pass, not from now: the bridge waits this long again
        after each hand-over, and hand-overs every few seconds (20 HPAs writing) held every full pass back for
        as long as they came, so a hand-edited runtime or a Deployment's new replicas waited that long."""
        if (throttled := self._throttle.remaining()) > 0:
            return throttled
        now = self._clock()
        due = [retry.retry_at - now for retry in self._retries.values() if retry.retry_at > self._passed_at]
        return max(0.0, min([self._resynced_at + self._resync_s - now, *due]))


def _uid(scale: JSON) -> str | None:
    uid = (scale.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) else None
