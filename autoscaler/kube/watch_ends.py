"""How the watches of a list + watch loop (`autoscaler.kube.list_watch.ListWatch`) are judged as they end, and
what their ends make the next try wait: the bars (`SHORT_WATCH_S`, `STAYED_OPEN_S`, `SHORT_LIVED_IN_A_ROW`) and the
counts they feed (`WatchEnds`), apart from the list and watch requests themselves.

- A watch that ends cleanly is reopened at once, however soon after it opened and however often (the reflector
  does so too): it is no failure, and nothing waits while the watch is said open. Only one that ends within
  `SHORT_WATCH_S` having carried nothing (a proxy that cuts streams, an API server shutting down: the reflector's
  "very short watch") is not reopened before `SHORT_WATCH_S` after it opened (`reopen_pause`), so such a server gets
  one watch a second from each loop, not one per round trip; `health` reads it closed meanwhile. From the second in
  a row since a watch last worked, each is also a failure told (`WatchEnds.very_short_end`), as the reflector warns
  of each: a proxy ending every stream at once was otherwise closed nearly all the time, unsaid.
- The count of failures in a row (`WatchEnds.in_a_row`, which `backoff(n)` counts) starts again once a watch
  worked: it had been open `SHORT_WATCH_S` or had carried an event (a BOOKMARK too) (`OpenWatch`). A stream cut
  after that (a load balancer cutting long-lived streams on its own clock, however soon after the reopen; a
  restart storm) is the first failure of a new spell, reopened after `backoff(1)`, not the next of one that
  doubled to 30 s. A watch that breaks as soon as it opens with nothing in it (a real failure loop) still backs
  off as before. One that worked yet broke within `STAYED_OPEN_S`, past `SHORT_LIVED_IN_A_ROW` in a row (a
  proxy that breaks every stream after its first bytes, in a namespace busy enough that each carries an event:
  reopened at `backoff(1)` forever, that was some 100 watch requests a minute per watch and namespace), waits at
  least `backoff(k + 1)`, k counting such watches past the limit (`WatchEnds.take_throttle`), until one stays open
  `STAYED_OPEN_S`; and `on_works` waits for that one. The failures after such a break (its reopen refused, 503 from
  an API server shutting down) wait as any answered failures in a row do, `backoff(1)`, `backoff(2)` ... (the
  break, a stream cut, was no answer), not counted on from k: a restart storm's refusals do not pile onto the
  throttle.
- A watch that worked and is dropped mid-stream (a proxy or load balancer cutting it, one API server instance of
  several restarting) is resumed from the resourceVersion it reached: the reopen replays what happened meanwhile, so
  nothing is missed, and client-go's reflector keeps its store as it is. Its owner may count what it has current for
  `DROPPED_GRACE_S` (`within_grace`); a reopen refused, or a watch still down past that, is an outage as any.

Tests set the bars for a stretch (`tests/support/watch_bars.py`): they are read here alone, as a watch opens and as
it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from autoscaler.kube.backoff import FailuresInARow

SHORT_WATCH_S: Final = 1.0
"""A watch that ends sooner than this with nothing in it is a "very short watch" (client-go's reflector's word); one
open this long, or one that carried an event, worked (`on_works`): a failure ending it starts a new
failing spell (`backoff(1)`), unless it is past the `SHORT_LIVED_IN_A_ROW`-th in a row to break within
`STAYED_OPEN_S`.

client-go's reflector (`tools/cache/reflector.go`, `handleWatch`) calls a watch that ends within a second having
delivered no event a "very short watch" and backs off, as after an error; any other it reopens at once. This loop
backs off a broken stream too (a proxy that breaks every stream is a failure loop), and tells the two apart with
the reflector's measure.
A longer bar (it was 5 s open) is met by no stream a load balancer cuts on its own clock every 6 s: reopened after
the first backoff (about 1 s), such a watch was open under 5 s at the next cut, counted as the next failure in a
row, waited longer, was open shorter still, and spiralled to 30 s closed. An event the owner failed on does not
count (it is the one the watch replays as soon as it opens, a failure loop)."""
STAYED_OPEN_S: Final = 3.0
"""A watch open this long stayed open: it starts the count of failures in a row again, however many short-lived
watches came before it. Streams normally last minutes (the server's `timeoutSeconds`); a load balancer that cuts
them on its own clock every 6 s or more leaves a watch reopened after its first backoff (0.5 s, 1 s for
RuntimeScales, ±20%) open 4.8 s or more, well past this, even on a loaded adapter; no spiral as `SHORT_WATCH_S`'s
5 s bar made either, as no such watch ends this soon."""
SHORT_LIVED_IN_A_ROW: Final = 3
"""How many watches in a row that worked (`SHORT_WATCH_S` open or an event carried) yet broke within `STAYED_OPEN_S`
still count as working: each is reopened after `backoff(1)` and told `on_works`. (This rule is ours: the reflector
has none like it.) A clean end counts for none of it. A restart storm (an HA control plane's three API servers
restarted one after another, each cutting the streams it serves) cuts a fresh watch at most two or three times in a
row. From the next one on (a proxy that breaks every stream after its first bytes, in a namespace busy enough that
every watch carries an event), such a watch's break waits `backoff(k + 1)`, k counting them past this, doubling to
its cap (about 2 watch requests a minute rather than about 100), and the owner hears that the loop works only once a
watch stays open `STAYED_OPEN_S`. The refusals of the reopen after a break wait `backoff(1)`, `backoff(2)` ... as the
answered failures of any spell do: counted on from k, a storm of five cuts each followed by two 503s waited 27 s
after the last, where it waited 3.8 s before there was a throttle."""


DROPPED_GRACE_S: Final = 5.0
"""How long a watch that worked, dropped mid-stream (`ListWatch.resuming`), may stay down and its owner's copy still
count as current: its reopen goes out after `backoff(1)` (0.5 s ±20% for pods) and is answered within a round trip,
so a drop resumed at once is never an outage (the pod watch's runtimes were served 503 from the drop to the reopen:
every HPA of the cluster held for a refresh at each dropped stream). One still down past it (its reopen unanswered,
a backoff grown past it) may be missing events that will not come soon: out of date from then on. A reopen the API
server refuses, or cannot be reached for, is out of date at once: that is no resumed watch."""


def within_grace(dropped_at: float) -> bool:
    """Whether a watch dropped at `dropped_at` (`time.monotonic`) is still within `DROPPED_GRACE_S` of its drop."""
    return time.monotonic() - dropped_at < DROPPED_GRACE_S


VERY_SHORT: Final = ("streams end as soon as they open (a proxy or load balancer closing idle or new streams?): "
                     f"each ended within {SHORT_WATCH_S:g} s with nothing in it")
"""What a very short watch's failure says (`ListWatch._very_short`)."""


def reopen_pause(opened: float) -> float:
    """How long a watch opened at `opened` (`time.monotonic`) that ended cleanly with nothing in it waits before it
    is reopened: until `SHORT_WATCH_S` after it opened, the reflector's pace (none where that has passed)."""
    return opened + SHORT_WATCH_S - time.monotonic()


class WatchEnds:
    """What a loop's watch ends and failures have added up to: its failures in a row, its short-lived watches in a
    row and the throttle they set, its very short watches since one worked."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        """`name` is how `log` (the owner's) calls the loop."""
        self._log = log
        self._name = name
        self.in_a_row = FailuresInARow()
        """Failures in a row, and those the server answered: `backoff`'s n counts the answered ones alone."""
        self.short_lived = 0
        """Watches in a row that worked yet broke within `STAYED_OPEN_S` (`SHORT_LIVED_IN_A_ROW`)."""
        self.throttle = 0
        """The `backoff` n the failure that broke the last of those watches waits at least (0: none)."""
        self.very_short_ends = 0
        """Very short watches (`SHORT_WATCH_S`) since a watch last worked: from the second on, each is a failure."""

    def very_short_end(self) -> bool:
        """Count a watch that ended cleanly within `SHORT_WATCH_S` with nothing in it; whether it is to be told as a
        failure: the second or more in a row since one worked (`ListWatch._very_short`)."""
        self.very_short_ends += 1
        return self.very_short_ends > 1

    def take_throttle(self) -> int:
        """The `backoff` n the failure being handled waits at least (0: none); the next failure's is 0 again."""
        throttle, self.throttle = self.throttle, 0
        return throttle

    def ended(self, worked: bool, open_s: float, *, broken: bool) -> None:
        """A watch ended after `open_s`, `broken` or not. One that stayed open `STAYED_OPEN_S` starts both counts
        again; one that worked starts the count of failures in a row again (its break, if any, is the first of a
        new spell). One that worked yet broke sooner is the next short-lived watch in a row: past
        `SHORT_LIVED_IN_A_ROW` its break waits at least `backoff(k + 1)`, k counting them past the limit, and the
        failures after it (the reopen refused) wait as any failures in a row do, not counted on from there: a restart
        storm's refusals do not pile onto the throttle. A clean end counts for neither: it is reopened at once."""
        if worked:
            self.very_short_ends = 0
        if open_s >= STAYED_OPEN_S:
            self.in_a_row.reset()
            self.short_lived = 0
        elif worked:
            self.in_a_row.reset()
            if broken:
                self.short_lived += 1
                if (churned := self.short_lived - SHORT_LIVED_IN_A_ROW) > 0:
                    self.throttle = churned + 1
                    self._log.debug("%s: %d watches in a row broke within %g s of opening; waiting longer each time "
                                    "until one stays open", self._name, self.short_lived, STAYED_OPEN_S)


class OpenWatch:
    """One watch from when its stream opened: whether it worked (open `SHORT_WATCH_S`, or an event handed over, a
    BOOKMARK too), told to `tell_works` once, as soon as it did; past `SHORT_LIVED_IN_A_ROW` short-lived watches in a
    row, only once it stayed open `STAYED_OPEN_S`. Timers tell it while no event comes; `ended` judges it by how long
    it was open, for a timer that was late."""

    def __init__(self, ends: WatchEnds, tell_works: Callable[[], None]) -> None:
        """Made as the stream opens, on the event loop."""
        self._ends = ends
        self._tell_works = tell_works
        self.opened = time.monotonic()
        self.worked = False
        self._told = False
        loop = asyncio.get_running_loop()
        self._timers = (loop.call_later(SHORT_WATCH_S, self.healthy), loop.call_later(STAYED_OPEN_S, self._stayed_open))

    def _tell(self) -> None:
        if not self._told:
            self._told = True
            self._tell_works()

    def healthy(self) -> None:
        """The watch worked: open `SHORT_WATCH_S` or an event handed over."""
        if not self.worked:
            self.worked = True
            if self._ends.short_lived < SHORT_LIVED_IN_A_ROW:  # else only once it stayed open
                self._tell()

    def _stayed_open(self) -> None:  # the counts start again as it ends (`WatchEnds.ended`)
        self.healthy()
        self._tell()

    def stop(self) -> None:
        """The stream is done with: no timer tells it any more."""
        for timer in self._timers:
            timer.cancel()

    def ended(self, *, broken: bool) -> None:
        """The watch ended, `broken` or not (after `stop`): judged by how long it was open, before the timers said
        so, then counted (`WatchEnds.ended`)."""
        if (open_s := time.monotonic() - self.opened) >= STAYED_OPEN_S:
            self._stayed_open()
        elif open_s >= SHORT_WATCH_S:
            self.healthy()
        self._ends.ended(self.worked, open_s, broken=broken)
