"""`ListWatch`: one resource of one scope kept current by list + watch, after client-go's reflector
(`tools/cache/reflector.go`), with a backoff of its own (below). Pod discovery, the HPA bounds and the RuntimeScale
wake-ups all run on it.

- List, then watch from the list's `resourceVersion` with `allowWatchBookmarks`: a BOOKMARK only moves the
  version on. The server ends each watch after `timeoutSeconds`; the next one resumes from the newest version
  seen, without listing again.
- 410 Expired (an ERROR event in the stream, or the status of the request): that version is gone, so list
  again, now a consistent read (no `resourceVersion`), as the reflector does once it saw "expired". When a
  fresh list's version expires straight away again, wait `backoff(n)` before the next list, so a compacting
  server is not hammered.
- A watch that ends cleanly is reopened at once; one that ends within `SHORT_WATCH_S` having carried nothing (the
  reflector's "very short watch") only `SHORT_WATCH_S` after it opened, and from the second in a row since a watch
  last worked it is also a failure told (`on_failure`, `health` as `no_answer`; `_very_short`): how each watch's end
  is judged, and what it makes the next try wait, is `autoscaler.kube.watch_ends`'s.
- Any other failure: wait `backoff(n)` (n: the answered failures in a row alone, as `backoff.FailuresInARow`
  counts them, so that a 503 of an API server still starting after an outage of refused connections is the first,
  not the 30 s cap the refused tries had doubled to; where the server never answered and the owner gives one,
  `unanswered_backoff(n)` of all the failures in a row, `backoff.UNANSWERED_MAX_S`), never less than the server's
  `Retry-After` (a 429 from API Priority and Fairness: client-go's REST client waits that long too), and resume the
  watch from the last version seen, or list when there was none yet. The count starts again once a watch worked:
  it had been open `SHORT_WATCH_S` or had carried an event (a BOOKMARK too); past `SHORT_LIVED_IN_A_ROW` watches in
  a row that worked yet broke within `STAYED_OPEN_S`, a break waits longer each time (`autoscaler.kube.watch_ends`).
  (The reflector's rule is not this one: it backs off a failed or very short watch with a backoff manager, 0.8 s
  doubling to 30 s, that starts again only after 2 minutes without a backoff, and reopens any other at once.) The
  failure that breaks a watch is said (`on_failure`, `health`) before any wait; where it dropped a watch that
  worked, which is resumed from where it was, `resuming` says so meanwhile (`watch_ends.DROPPED_GRACE_S`).

`list_from_cache` makes the first list `resourceVersion=0`, served from the API server's watch cache (cheap for
10,000 pods), as the reflector's first list is. The error texts name `list|watch <resource> in <scope>`.

What the objects mean stays with the owner, told through five callbacks: `on_list(items)` replaces its copy
with the listed objects, `on_event(type, object)` folds one ADDED/MODIFIED/DELETED event in, `on_synced()`
says the copy is current (a list arrived, a watch opened), `on_failure(error, n)` says it is not (the owner
logs and flags that its own way), and `on_works()` says the loop works (a list handed over, a watch that worked:
open `SHORT_WATCH_S` or an event handed over; past `SHORT_LIVED_IN_A_ROW` short-lived ones, open `STAYED_OPEN_S`):
only then may an owner say a failing watch works again, as a
watch that opens and breaks at once does not (`autoscaler.kube.failing_spell`). Failures are `KubeApiError`s;
anything else (the owner's `on_list` or `on_event` raising: a bug) is retried too, a watch must never stop
silently, and logged with its traceback once a failing spell, the repeats at DEBUG, with an INFO once the loop
works again, as `on_works` is told (`RetryGuard.unexpected`). Nor can the owner's own `backoff` or `on_failure` stop it:
one that raises (or a backoff that answers no wait) is said once at ERROR and the loop retries at
`retry_guard.FALLBACK_BACKOFF` (`autoscaler.kube.retry_guard`).

Each failure, by its cause, and whether the watch is open go to `health` (`autoscaler.kube.watch_health`): the
adapter's `modelmesh_autoscaler_watch_failures_total` and `modelmesh_autoscaler_watch_established`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from autoscaler.kube.backoff import unanswered
from autoscaler.kube.errors import KubeApiError, WatchExpiredError
from autoscaler.kube.raw import JSON, Endpoint, Scope, describe, open_stream, read_json, scope_name, status_error
from autoscaler.kube.retry_guard import RetryGuard
from autoscaler.kube.watch_ends import VERY_SHORT, OpenWatch, WatchEnds, reopen_pause
from autoscaler.kube.watch_health import LoopHealth


def _nothing() -> None:
    return None


class ListWatch:
    """Lists then watches `resource` in `scope` forever (`run`), through `endpoint`."""

    def __init__(
        self,
        endpoint: Endpoint,
        resource: str,
        scope: Scope,
        *,
        on_list: Callable[[list[JSON]], None],
        on_event: Callable[[str, JSON], None],
        on_synced: Callable[[], None] = _nothing,
        on_failure: Callable[[Exception, int], None] | None = None,
        on_works: Callable[[], None] = _nothing,
        backoff: Callable[[int], float],
        request_timeout_s: float,
        watch_timeout_s: int,
        filters: Mapping[str, Any] | None = None,
        list_from_cache: bool = False,
        log: logging.Logger,
        name: str,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        health: LoopHealth | None = None,
        unanswered_backoff: Callable[[int], float] | None = None,
    ) -> None:
        """`endpoint` is the generated list method of the resource in the scope (`autoscaler.kube.raw.Endpoint`);
        `filters` (e.g. `label_selector`) go with every list and watch.

        `request_timeout_s` bounds a list; `watch_timeout_s` is the server-side `timeoutSeconds` of one watch,
        which the client-side limit exceeds by `request_timeout_s`: it only catches a server that stopped
        talking. `name` is how `log` calls this loop (expiries at INFO, unexpected errors with a traceback).
        `sleep` waits between attempts (tests record the waits instead). `health` is told of each failure, by
        its cause, and of whether the watch is open (`autoscaler.kube.watch_health`): the adapter's metrics.
        `unanswered_backoff(n)`, where given, is the wait after the n-th failure in a row that the API server never
        answered (`backoff.unanswered`; not a short-lived watch's throttle): the owner's shorter one, so that the
        loop is back within seconds of an API server's return (`backoff.UNANSWERED_MAX_S`)."""
        self.resource = resource
        self.scope = scope
        self._endpoint = endpoint
        self._on_list = on_list
        self._on_event = on_event
        self._on_synced = on_synced
        self._on_works = on_works
        self._guard = RetryGuard(backoff, log=log, name=name, on_failure=on_failure)
        """Neither the owner's backoff nor its failure handler can end the loop (`autoscaler.kube.retry_guard`)."""
        self._unanswered = None if unanswered_backoff is None else RetryGuard(unanswered_backoff, log=log, name=name)
        """The same for the wait after a failure the API server never answered, where the owner has one."""
        self._request_timeout_s = request_timeout_s
        self._watch_timeout_s = watch_timeout_s
        self._filters = dict(filters or {})
        self._list_from_cache = list_from_cache
        self._log = log
        self.listing = True
        """Whether the next (or failing) request is a list, not a watch: a refused list leaves the owner with no
        copy at all, a refused watch only with a stale one."""
        self.told_of_list = False
        """True while `on_works` is told of a list handed over, not of a watch that worked: an owner whose line says
        the watch is open (the pod watch's `established`) waits for the watch (a Role with list but not watch on
        pods lets every list work and refuses every watch)."""
        self._name = name
        self._sleep = sleep
        self._health = health
        self._ends = WatchEnds(log, name)
        """Its failures and watch ends in a row, which its waits count (`autoscaler.kube.watch_ends`)."""
        self.resuming = False
        """True while `on_failure` is told of a watch that worked dropped mid-stream (a proxy or load balancer cutting
        it, one API server instance restarting), which the loop resumes from the version it reached after
        `backoff(1)`: the reopen replays what happened meanwhile, so nothing was missed, and the owner may count its
        copy current for `watch_ends.DROPPED_GRACE_S`. False for any other failure: a list's, a watch's opening (its
        reopen refused, the API server unreachable), a watch broken before it worked (a failure loop, whose reopen
        backs off), one of a churn past `SHORT_LIVED_IN_A_ROW` (its reopen waits longer each time), the owner's own
        code failing, a very short watch."""
        self._dropped = False
        """Whether the last request was a watch that worked and broke mid-stream (`_watch`), for `resuming`."""

    async def run(self) -> None:
        """List then watch until cancelled: resume after a clean end, list again after 410, back off on errors."""
        if self._health is not None:
            self._health.started(self.scope)
        try:
            await self._run()
        finally:
            self._established(False)

    async def _run(self) -> None:
        version: str | None = None
        consistent = not self._list_from_cache
        expiries = 0
        while True:
            self.listing = version is None
            self._dropped = False
            try:
                if version is None:
                    version = await self._list(consistent)
                    self.listing = False
                    self.told_of_list = True
                    try:
                        self._works()
                    finally:
                        self.told_of_list = False
                opened = time.monotonic()
                version, worked = await self._watch(version)
                expiries = 0
                if not worked:
                    if self._ends.very_short_end():
                        self._very_short()
                    if (pause := reopen_pause(opened)) > 0:
                        self._log.debug("%s: the watch ended at once with nothing in it; reopening in %.1f s",
                                        self._name, pause)
                        await self._sleep(pause)
            except WatchExpiredError as error:
                self._failed(error)
                self._log.info("%s expired (%s); listing again", self._name, error)
                version = None
                consistent = True
                expiries += 1
                if expiries > 1:  # expired again right after a fresh list: do not hammer the API server
                    await self._sleep(self._guard.wait(expiries - 1))
            except Exception as error:
                self._failed(error)
                n = self._ends.in_a_row.failed(error)
                failures = self._ends.in_a_row.failures
                if not isinstance(error, KubeApiError):
                    self._guard.unexpected(error, failures)
                self.resuming = self._dropped and isinstance(error, KubeApiError) and not self._ends.throttle
                try:
                    self._guard.tell_failure(error, failures)
                finally:
                    self.resuming = False
                retry_after = error.retry_after_s if isinstance(error, KubeApiError) else None
                throttle = self._ends.take_throttle()
                guard = self._guard
                if not throttle and self._unanswered is not None and unanswered(error):
                    guard = self._unanswered  # no answer: retried within seconds, so back soon after the server is
                await self._sleep(guard.wait(max(n, throttle), retry_after))

    def _very_short(self) -> None:
        """A watch ended cleanly within `SHORT_WATCH_S` with nothing in it, the second or more in a row since one
        worked: client-go's reflector's "very short watch", which it logs at warning. (One alone is no news: an API
        server shutting down, or a test's, ends the streams it serves once, and the next watch works.) Said to the
        owner (`on_failure`, once a spell in its log) and counted
        (`health`, as `no_answer`: no status, as a dropped stream) as a failure: behind a proxy that ends every
        stream at once, the watch was closed nearly all the time while its failures read 0 and nothing was logged
        above DEBUG. Its pace stays the reflector's (reopened `SHORT_WATCH_S` after it opened), and it is not the
        next failure in a row of `backoff`: a clean end counts for none of it."""
        error = KubeApiError(f"watch {self.resource} in {scope_name(self.scope)}: {VERY_SHORT}")
        self._failed(error)
        self._guard.tell_failure(error, self._ends.in_a_row.failures + 1)

    def _works(self) -> None:
        """The loop works: a list handed over, or a watch that worked (`_healthy`). Neither starts the count of
        failures in a row again here: a watch refused (a Role with list but not watch) right after its list is the
        next failure in a row, and a watch that worked does so as it ends (`WatchEnds.ended`)."""
        self._guard.works(self._ends.in_a_row.failures)
        self._on_works()

    def _healthy(self) -> None:
        """The watch worked: open `SHORT_WATCH_S` or `STAYED_OPEN_S` (`OpenWatch`'s timers) or its first event handed
        over. Nothing it raises may escape: the owner's `on_works` failing is a bug to say, and the loop goes on."""
        try:
            self._works()
        except Exception as error:
            self._log.error("%s: telling that the watch works failed: %r. This is a bug of the adapter: please "
                            "report it with this message", self._name, error, exc_info=error)

    def _failed(self, error: Exception) -> None:
        """Tell `health` of one failure: the watch is not open, and why."""
        if self._health is not None:
            self._health.failed(error)
        self._established(False)

    def _established(self, established: bool) -> None:
        if self._health is not None:
            self._health.established(self.scope, established)

    async def _list(self, consistent: bool) -> str:
        """Hand a fresh list to `on_list`; returns its resourceVersion to watch from."""
        what = f"list {self.resource} in {scope_name(self.scope)}"
        options: dict[str, Any] = {**self._filters, "_request_timeout": self._request_timeout_s}
        if not consistent:
            options["resource_version"] = "0"
        document = await read_json(partial(self._endpoint, **options), what)
        items = document.get("items")
        self._on_list([item for item in items if isinstance(item, dict)] if isinstance(items, list) else [])
        version = (document.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise KubeApiError(f"{what}: the answer has no resourceVersion")
        self._on_synced()
        return version

    async def _watch(self, version: str) -> tuple[str, bool]:
        """Follow one watch request until the server ends it; returns the newest resourceVersion seen and
        whether the watch worked (`SHORT_WATCH_S` open or an event handed over, a BOOKMARK too), which it has
        told (`_healthy`) as soon as it did (`OpenWatch`)."""
        what = f"watch {self.resource} in {scope_name(self.scope)}"
        call = partial(
            self._endpoint, **self._filters, resource_version=version, allow_watch_bookmarks=True, watch=True,
            timeout_seconds=self._watch_timeout_s,
            _request_timeout=float(self._watch_timeout_s) + self._request_timeout_s,
        )
        response = await open_stream(call, what)
        watch = OpenWatch(self._ends, self._healthy)
        broken = True
        try:
            self._established(True)
            self._on_synced()
            while True:
                try:
                    line = await response.content.readline()
                except Exception as error:
                    raise KubeApiError(f"{what}: stream broken: {describe(error)}") from error
                if not line:
                    broken = False
                    break
                if line.strip():
                    version = self._apply(line, what) or version
                    watch.healthy()
        except WatchExpiredError:
            broken = False  # the server's word that the version is gone: listed again at once, no break
            raise
        finally:
            watch.stop()
            response.release()
            self._established(False)  # 1 only while a stream is open: not through a pause before the next
            watch.ended(broken=broken)
            self._dropped = broken and watch.worked
        return version, watch.worked  # as the end settled it: one open past `SHORT_WATCH_S` whose timer was late worked

    def _apply(self, line: bytes, what: str) -> str | None:
        """Hand one event to `on_event` (BOOKMARKs only move the version); returns its resourceVersion."""
        try:
            event = json.loads(line)
        except ValueError as error:
            raise KubeApiError(f"{what}: undecodable event: {line[:200]!r}") from error
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(obj, dict):
            raise KubeApiError(f"{what}: unexpected event: {line[:200]!r}")
        kind = event.get("type")
        if kind == "ERROR":
            raise status_error(what, int(obj.get("code") or 500), obj)
        if kind != "BOOKMARK":
            self._on_event(str(kind), obj)
        seen = (obj.get("metadata") or {}).get("resourceVersion")
        return seen if isinstance(seen, str) and seen else None
