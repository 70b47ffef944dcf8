"""`FailingSpell`: when a watch's owner says it is failing and when it works again, the one rule for every owner.

Each list + watch (`autoscaler.kube.list_watch.ListWatch`) tells its owner of every failure (`on_failure`) and of
every time it works (`on_works`: a list handed over, a watch open `SHORT_WATCH_S` or that carried an event). The
owners said "works again" (`established`) each time a watch opened, and "failing" (`broken`) at the next failure: a
watch that opens and breaks at once (a proxy refusing streams, the adapter's own code failing on one object it
replays) wrote a WARNING and a false INFO at every retry. So a spell is said once, by its first failure, and its end
once, when the loop works; the failures in between are for DEBUG, as long as they fail the same way. A failure of
another cause (`autoscaler.kube.watch_health.failure_reason`: a dropped stream, then a Role edited to refuse the
watch) is said at WARNING too, within the spell: otherwise the log blamed the network for an RBAC refusal that
lasted as long as it did. A watch that starts as failing, so that its first success is said (the pod watch's
`established`), says its first failure too: refused from its very start (a Role without `list` on pods), it said
nothing above DEBUG until it worked, and the operator never read which watch, where, or why.
"""

from __future__ import annotations

from autoscaler.kube.watch_health import FailureReason, failure_reason


class FailingSpell:
    """Whether the owner has said its watch is failing (`failing`), and so what a failure or a recovery says."""

    def __init__(self, *, failing: bool) -> None:
        """`failing`: whether it starts as said failing, so that the first time it works is said (the pod watch's
        `established`), or as working, so that only a recovery after a failure is (the RuntimeScale watch's). Either
        way its first failure is said."""
        self.failing = failing
        self._reason: FailureReason | None = None
        """The cause the last WARNING said, while `failing` after a failure; None before any (at the start too)."""

    def failed(self, error: BaseException) -> bool:
        """One failure: whether it starts a spell (the first failure since the start or since it worked), or fails
        for another reason than the one said (say it at WARNING), rather than repeat one (DEBUG)."""
        reason = failure_reason(error)
        starts = not self.failing or reason != self._reason
        self._reason = reason
        self.failing = True
        return starts

    def works(self) -> bool:
        """The loop works: whether that ends a spell (say it works again) rather than go on working."""
        ends, self.failing, self._reason = self.failing, False, None
        return ends
