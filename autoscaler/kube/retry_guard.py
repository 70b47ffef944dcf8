"""`RetryGuard`: the callables a retrying Kubernetes loop's owner hands it (`backoff`, `on_failure`), kept from
ending the loop.

Those loops (`ListWatch` for the pods, HPAs and RuntimeScales, the Deployment resync) run forever in a background
task: an exception that escapes their retry handler ends the task, and nothing reads a background task's
exception, so the watch stopped without a word while what it kept went stale for good (the HPA watch's own
backoff overflowed a float after 1,025 failures in a row, and the HPAs' bounds never came back). A backoff that
raises, or answers no wait at all (NaN, infinite, negative), is replaced by `FALLBACK_BACKOFF`; an `on_failure`
that raises is skipped. Either is said once at ERROR, with its traceback and the loop's name, until it works
again: a loop retrying every half second must not write a traceback each time.

So is the owner's own code failing in the loop (`unexpected`: `ListWatch`'s `on_list` or `on_event` raising anything
but a `KubeApiError`, the Deployment resync's reads failing so): it wrote "unexpected error" and a whole traceback at
every retry, every 0.5 to 30 s for as long as it lasted. Now each kind of error (its type) is said with its traceback
once a failing spell, the repeats at DEBUG, and an INFO says when the loop `works` again; a kind first seen within the
spell is said too. A loop that reads several namespaces (the Deployment resync) names the one failing (`where`): each
is a spell of its own, said with its namespace and ended when that one works again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import partial
from typing import Final

from autoscaler.kube.backoff import exponential_delay

FALLBACK_INITIAL_S: Final = 0.5
FALLBACK_CAP_S: Final = 30.0
FALLBACK_BACKOFF: Final = partial(exponential_delay, initial_s=FALLBACK_INITIAL_S, cap_s=FALLBACK_CAP_S)
"""The wait after the n-th failure in a row while the owner's backoff is broken: the list + watch loops' own
default (0.5 s doubling to 30 s), which cannot overflow."""
FALLBACK_TEXT: Final = f"{FALLBACK_INITIAL_S:g} s doubling to {FALLBACK_CAP_S:g} s"


class RetryGuard:
    """Calls a loop's `backoff` and `on_failure` so that neither can end it (`wait`, `tell_failure`)."""

    def __init__(
        self,
        backoff: Callable[[int], float],
        *,
        log: logging.Logger,
        name: str,
        on_failure: Callable[[Exception, int], None] | None = None,
    ) -> None:
        """`name` is how `log` calls the loop ("HPA watch of namespace team-a"): the ERROR names it, so that an
        operator knows which objects stop being current while it goes on."""
        self._backoff = backoff
        self._on_failure = on_failure
        self._log = log
        self._name = name
        self._broken: set[str] = set()
        """The callables whose failure was said and whose recovery was not yet ("backoff", "on_failure")."""
        self._unexpected: set[tuple[str | None, str]] = set()
        """The kinds of unexpected error said in this failing spell, by where (None: the loop's one thing) and type
        name: forgotten once it `works` (there)."""

    def unexpected(self, error: Exception, failures: int, where: str | None = None) -> None:
        """The loop's `failures`-th failure in a row is not the API's but the adapter's own code's (`error`): said
        with its traceback the first time its kind comes in a failing spell (of `where`: "in namespace ns", for a
        loop that reads several), else at DEBUG."""
        key = (where, type(error).__name__)
        at = f" {where}" if where else ""
        if key not in self._unexpected:
            self._unexpected.add(key)
            self._log.error("%s: unexpected error %r%s; retrying as after any failure, and saying it again at DEBUG "
                            "only until it works again. This is a bug of the adapter: please report it with this "
                            "message", self._name, error, at, exc_info=error)
        else:
            self._log.debug("%s: unexpected error %r%s again (failures in a row: %d)", self._name, error, at,
                            failures)

    def works(self, failures: int, where: str | None = None) -> None:
        """The loop did what failed (a list handed over, a watch run to its end; the read of `where`) after
        `failures` failures in a row: an unexpected error said in this spell (there) is over, and said to be."""
        ended = {key for key in self._unexpected if where is None or key[0] == where}
        if ended:
            self._unexpected -= ended
            self._log.info("%s: works again%s after the unexpected error (%d failure%s in a row)", self._name,
                           f" {where}" if where else "", failures, "" if failures == 1 else "s")

    def wait(self, failures: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after the `failures`-th failure in a row: the owner's `backoff(failures)`, else
        `FALLBACK_BACKOFF`; never sooner than the server's `Retry-After`."""
        try:
            delay = float(self._backoff(failures))
        except Exception as error:
            self._said_broken("backoff", f"its backoff raised {error!r} (failures in a row: {failures})",
                              exc_info=error)
            delay = FALLBACK_BACKOFF(failures)
        else:
            if not math.isfinite(delay) or delay < 0:
                self._said_broken("backoff", f"its backoff answered {delay!r} s, not a wait "
                                  f"(failures in a row: {failures})")
                delay = FALLBACK_BACKOFF(failures)
            else:
                self._works("backoff")
        return max(delay, retry_after_s or 0.0)

    def tell_failure(self, error: Exception, failures: int) -> None:
        """Hand the owner the `failures`-th failure in a row (`on_failure`); one it cannot take is said, not
        raised: the loop retries either way."""
        if self._on_failure is None:
            return
        try:
            self._on_failure(error, failures)
        except Exception as raised:
            self._said_broken("on_failure", f"its failure handler raised {raised!r} when told of {error}",
                              exc_info=raised)
        else:
            self._works("on_failure")

    def _said_broken(self, what: str, detail: str, exc_info: BaseException | None = None) -> None:
        if what in self._broken:
            self._log.debug("%s: %s (again)", self._name, detail)
            return
        self._broken.add(what)
        instead = (f"waiting {FALLBACK_TEXT} between retries instead" if what == "backoff"
                   else "its failure is not recorded (its health may read as current)")
        self._log.error("%s: %s; retrying anyway, %s, until it works again. This is a bug of the adapter: "
                        "please report it with this message", self._name, detail, instead, exc_info=exc_info)

    def _works(self, what: str) -> None:
        if what in self._broken:
            self._broken.discard(what)
            self._log.info("%s: its %s works again", self._name,
                           "backoff" if what == "backoff" else "failure handler")
