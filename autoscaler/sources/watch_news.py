"""Pod discovery's lines about its pod watches, one a namespace with `--namespaces`: broken and established.

One watch at a time, a line each: `pod watch of namespace team-a broken, keeping last inventory; ...`. But the
watches of a tenant list start together at every start, and an API server restart (a control-plane upgrade)
breaks all of them at once and they come back within a second or two: with 30 namespaces that was 30 lines at
each start and 60 at each restart. So what the watches of one event loop say is kept for `WINDOW_S` from the
first of it and said then, as `autoscaler.transition_log` says a refresh's runtimes: a line each up to `NAMED`
namespaces of a kind, else one line with the count, the first few named and one watch's error.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Final

from autoscaler.kube.raw import Scope, scope_name
from autoscaler.log_lists import NAMED, few

log = logging.getLogger("autoscaler.sources.kube_pods")

WINDOW_S: Final = 1.0
"""How long the first news waits for the rest: the watches broken together come back within the list-watch
backoff's first jittered step (`spread_delay`), under a second."""


class WatchNews:
    """Collects the pod watches' broken (`broken`) and established (`established`) news, said `WINDOW_S` later."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._broken: list[tuple[Scope, str]] = []
        self._established: list[Scope] = []
        self._due: asyncio.TimerHandle | None = None

    def broken(self, scope: Scope, error: object) -> None:
        self._broken.append((scope, str(error)))
        self._soon()

    def established(self, scope: Scope) -> None:
        self._established.append(scope)
        self._soon()

    def _soon(self) -> None:
        if self._due is None:
            self._due = asyncio.get_running_loop().call_later(self._window_s, self.flush)

    def flush(self) -> None:
        """Say what was collected, now (at the end of the window; at close, what is left)."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        broken, established = self._broken, self._established
        self._broken, self._established = [], []
        if len(broken) <= NAMED:
            for scope, error in broken:
                log.warning("Kubernetes discovery: pod watch of %s broken, keeping last inventory; its runtimes "
                            "hold their values until it recovers: %s", scope_name(scope), error)
        else:
            log.warning("Kubernetes discovery: pod watches of %d namespaces broken, keeping last inventory; their "
                        "runtimes hold their values until they recover: %s (e.g. %s: %s)", len(broken),
                        few([_named(scope) for scope, _ in broken]), scope_name(broken[0][0]), broken[0][1])
        if len(established) <= NAMED:
            for scope in established:
                log.info("Kubernetes discovery: pod watch of %s established", scope_name(scope))
        else:
            log.info("Kubernetes discovery: pod watches of %d namespaces established: %s", len(established),
                     few([_named(scope) for scope in established]))


def _named(scope: Scope) -> str:
    return scope if scope is not None else scope_name(scope)


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WatchNews] = weakref.WeakKeyDictionary()


def watch_news() -> WatchNews:
    """The news of the running event loop's pod watches: every watch of one discovery shares it."""
    loop = asyncio.get_running_loop()
    news = _BY_LOOP.get(loop)
    if news is None:
        news = _BY_LOOP[loop] = WatchNews()
    return news
