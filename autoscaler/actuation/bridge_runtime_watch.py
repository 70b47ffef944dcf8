"""`ServingRuntimeWatch`: hands the replica bridge each ServingRuntime that changes, so that one set behind its
back is set back within a round trip instead of at the next full pass.

Why: the modelmesh-serving controller scales the runtime Deployment to `ServingRuntime.spec.replicas` at once.
A `kubectl apply` of a manifest that still says `replicas: 2` while the HPA asks 6, a `kubectl edit`, or the
runtime deleted and created again, put the Deployment at 2 (pods killed, models unloaded) until the bridge's
next full pass set it back: up to the resync (15 s), longer under load. The bridge decides what to do with each
runtime (`HandOvers.runtime_changed`: only one whose replicas differ from what it carries is queued, so its
own writes, handed back here, start nothing).

The list + watch is `autoscaler.kube.list_watch`'s, as the RuntimeScale watch's. A (re)list hands every runtime
over (events may have been missed). An install whose ClusterRole predates the watch (get and list on
servingruntimes, no watch) is refused with 403: the bridge then falls back to its full pass, as before, and the
log says it once, at WARNING, with the verb to add (`Refusals`); the watch keeps trying at its capped backoff
and says at INFO when it works. Other failures are at DEBUG: the RuntimeScale watch of the same API server says
them, and the full pass covers the gap. No `watch_established` series: a refused watch is a supported fallback,
not an alert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from autoscaler.actuation.bridge_status import SERVING_RUNTIMES
from autoscaler.actuation.bridge_watch import WatchClient
from autoscaler.kube.backoff import UNANSWERED_MAX_S, spread_delay
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.list_watch import ListWatch
from autoscaler.kube.raw import JSON, Scope, scope_name

log = logging.getLogger("autoscaler.actuation.bridge")

REFUSED_BACKOFF_CAP_S = 60.0
"""The longest wait between two tries of a failing watch: a refused one (an older Role) costs at most a request a
minute per namespace, and a Role fixed meanwhile is noticed within a minute. One the API server never answered (an
outage) waits at most about 4 s (`backoff.UNANSWERED_MAX_S`): a hand edit made meanwhile is set back within seconds
of its return."""


class Refusals:
    """Whether a refusal (401/403) of the bridge's ServingRuntime watches was said: once for all of them (the
    same ClusterRole refuses every namespace), and which scopes were refused, so that their recovery is said."""

    def __init__(self) -> None:
        self._warned = False
        self.refused: set[Scope] = set()

    def refused_in(self, scope: Scope, error: Exception, listing: bool) -> None:
        """A refusal in `scope`: WARNING for the first of all the watches, DEBUG for the rest."""
        self.refused.add(scope)
        if self._warned:
            log.debug("replica bridge: ServingRuntime watch of %s refused again: %s", scope_name(scope), error)
            return
        self._warned = True
        verbs = "list and watch" if listing else "watch"
        log.warning("replica bridge: cannot %s ServingRuntimes in %s (%s): a ServingRuntime whose spec.replicas is "
                    "set by hand (kubectl apply, kubectl edit) or that is created again is set back at the next "
                    "resync instead of at once. Add the verb%s %s on servingruntimes (serving.kserve.io) to the "
                    "adapter's ClusterRole (manifests/base/cluster-role.yaml)", "list" if listing else "watch",
                    scope_name(scope), error, "s" if listing else "", verbs)

    def works_in(self, scope: Scope) -> None:
        """The watch of `scope` works: said at INFO where it was refused."""
        if scope in self.refused:
            self.refused.discard(scope)
            log.info("replica bridge: ServingRuntime watch of %s works: hand edits of spec.replicas are set back "
                     "at once", scope_name(scope))
            if not self.refused:
                self._warned = False  # a later refusal (the Role edited again) is news


class ServingRuntimeWatch:
    """Lists then watches the ServingRuntimes of one scope (`run`), calling `on_change(runtime)` with each one
    listed, added or changed (a deletion leaves nothing to set back: the full pass reports it)."""

    def __init__(
        self,
        client: WatchClient,
        scope: Scope,
        on_change: Callable[[JSON], None],
        *,
        refusals: Refusals | None = None,
        watch_timeout_s: int = 300,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = REFUSED_BACKOFF_CAP_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`refusals`: shared by all the bridge's ServingRuntime watches (`serving_runtime_watches`), so that a
        Role without the verb is said once, not once per namespace. `sleep` waits between attempts (tests play
        the waits on a clock of their own)."""
        self.scope = scope
        self._on_change = on_change
        self._refusals = refusals or Refusals()
        self._loop = ListWatch(
            client.custom_endpoint(SERVING_RUNTIMES, scope), SERVING_RUNTIMES.plural, scope,
            on_list=self._listed, on_event=self._changed, on_failure=self._failed, on_works=self._works,
            backoff=partial(spread_delay, initial_s=backoff_base_s, cap_s=backoff_cap_s),
            unanswered_backoff=partial(spread_delay, initial_s=backoff_base_s,  # back soon after an outage
                                       cap_s=min(backoff_cap_s, UNANSWERED_MAX_S)),
            request_timeout_s=client.request_timeout_s, watch_timeout_s=watch_timeout_s,
            log=log, name=f"replica bridge: ServingRuntime watch of {scope_name(scope)}", sleep=sleep,
        )

    async def run(self) -> None:
        """List then watch until cancelled."""
        await self._loop.run()

    def _listed(self, items: list[JSON]) -> None:
        for item in items:
            self._on_change(item)

    def _changed(self, kind: str, obj: JSON) -> None:
        if kind != "DELETED":
            self._on_change(obj)

    def _failed(self, error: Exception, failures: int) -> None:
        if isinstance(error, KubeApiError) and error.status in (401, 403):
            self._refusals.refused_in(self.scope, error, self._loop.listing)
        else:
            log.debug("replica bridge: ServingRuntime watch of %s failed (%d in a row; the full pass sets hand "
                      "edits back meanwhile): %s", scope_name(self.scope), failures, error)

    def _works(self) -> None:
        # Only once a watch works, not at a list: an older Role lists and refuses every watch.
        if not self._loop.told_of_list:
            self._refusals.works_in(self.scope)


def serving_runtime_watches(client: WatchClient, scopes: Sequence[Scope], on_change: Callable[[JSON], None], *,
                            backoff_base_s: float = 1.0,
                            backoff_cap_s: float = REFUSED_BACKOFF_CAP_S) -> list[ServingRuntimeWatch]:
    """One watch per scope the bridge serves, sharing one `Refusals`."""
    refusals = Refusals()
    return [ServingRuntimeWatch(client, scope, on_change, refusals=refusals, backoff_base_s=backoff_base_s,
                                backoff_cap_s=backoff_cap_s) for scope in scopes]
