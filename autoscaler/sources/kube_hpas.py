"""`HpaWatch`: the replica bounds of each runtime, read from the `autoscaling/v2` HPAs that scale it.

docs/design.md (Bounds): without `min_replicas`/`max_replicas` in the config, the recommendation is clamped
to the `minReplicas`/`maxReplicas` of the HPA that scales the runtime, so a value the HPA would cut anyway is
never served above its cap (and the smoothing state never climbs past it). The HPAs of the watched
namespaces are listed, then watched (resumed from the last resourceVersion; re-listed after 410 Expired;
capped backoff on errors, to 4 s where the API server never answered) by the same
`autoscaler.kube.list_watch.ListWatch` as the pods.

An HPA scales a runtime when:
- its `scaleTargetRef` is the runtime's Deployment (`kind: Deployment`, `name: <deployment>`);
- or one of its external metrics selects the runtime: `deployment=<name>` or `servingruntime=<name>`;
- or, when no metric selects one, its `scaleTargetRef` is a `RuntimeScale` (docs/design.md, RuntimeScale
  bridge), taken to be named after the ServingRuntime, which means the Deployment `modelmesh-serving-<name>`.
  The name is only a guess (the RuntimeScale's `spec.servingRuntime` says), so a metric's selector wins.

While the HPAs cannot be read, the bounds stay as last seen: a lost watch must not lift a cap. When two
HPAs claim one runtime (a misconfiguration), the tighter bounds apply and a warning says so once.

An HPA of ours (on a RuntimeScale, or on the adapter's metrics) named like the runtime Deployment it scales
gets a warning once too: modelmesh-serving manages the HPA of that name. While the ServingRuntime has no
autoscaler class, its controller replaces the HPA with a CPU HPA on the Deployment (an update without a
resourceVersion, which HPAs allow) and then deletes it, so the user's HPA vanishes (read in
modelmesh-serving's `controllers/hpa/hpa_reconciler.go`). Once: while the HPA is there, and when it comes back
while among the last `GONE_HPAS_REMEMBERED` such HPAs deleted (a GitOps tool applying it again), so that HPA
churn does not grow what the watch remembers (`autoscaler.said_once`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import ChainMap
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import aiohttp

from autoscaler.kube.backoff import UNANSWERED_MAX_S, exponential_delay
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.failing_spell import FailingSpell
from autoscaler.kube.list_watch import ListWatch
from autoscaler.kube.paths import HPAS, collection_endpoint
from autoscaler.kube.raw import JSON, Scope, scope_name
from autoscaler.kube.session import ClientFactory, KubeSession
from autoscaler.kube.watch_health import LoopHealth, Watched, WatchHealth
from autoscaler.kube.watch_news import ScopeLine, flushed_when_stopped, watch_news
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.names import SELECTOR_DEPLOYMENT, SELECTOR_SERVINGRUNTIME, SERVINGRUNTIME_DEPLOYMENT_PREFIX
from autoscaler.said_once import SaidOnce
from autoscaler.sources.hpa_selections import gone_reasons, owners_by_runtime, selection_warnings

log = logging.getLogger("autoscaler.sources.kube_hpas")

# What each namespace's HPA watch says, a line each, or one line for more than ten namespaces at once: an API
# server restart (5xx during a control-plane upgrade) refuses all of them together (`autoscaler.kube.watch_news`).
FAILING = ScopeLine(
    log.name, logging.WARNING,
    "HPA watch of {scope} failing, keeping the bounds last seen: {detail}",
    "HPA watches of {count} namespaces failing, keeping the bounds last seen: {scopes} (e.g. {scope}: {detail})")
WORKS_AGAIN = ScopeLine(
    log.name, logging.INFO,
    "HPA watch of {scope} works again; the bounds are current",
    "HPA watches of {count} namespaces work again; the bounds are current: {scopes}",
    ends=(FAILING,))

RUNTIME_SCALE_KIND: Final = "RuntimeScale"
RETRY_BACKOFF: Final = partial(exponential_delay, initial_s=0.5, cap_s=30.0)
"""The wait after the n-th failed list or watch in a row: 0.5 s doubling to 30 s, for however long the API server
refuses (the exponent is capped, so a night of failures never overflows the float)."""


def _unanswered_backoff(backoff: Callable[[int], float], failures: int) -> float:
    """The wait after the n-th failure in a row the API server never answered: `backoff`'s, at most
    `UNANSWERED_MAX_S` (0.5, 1, 2, then 4 s: `RETRY_BACKOFF` has no jitter to keep), so that after an outage the
    bounds are current within seconds of the API's return; a raised maxReplicas was read 21.5 s after a 40 s one."""
    return min(backoff(failures), UNANSWERED_MAX_S)


GONE_HPAS_REMEMBERED: Final = 1000
"""HPAs warned about and since deleted whose warning is not said again when they come back (`SaidOnce`): a
GitOps tool re-creating the HPA modelmesh-serving's controller deleted, minutes later, is no news."""


@dataclass(frozen=True, slots=True)
class HpaBounds:
    """One HPA's bounds and the runtimes it scales."""

    namespace: str
    name: str
    min_replicas: int
    max_replicas: int
    runtimes: tuple[RuntimeKey, ...]
    controller_name: bool = False
    """Ours, and named like the runtime Deployment: modelmesh-serving owns that HPA name."""
    aimed: RuntimeKey | None = None
    """The runtime its RuntimeScale target is named after, where its metrics select other runtimes: it scales that
    runtime on their values (a selector edited or copied from another HPA, a typo), and none of its bounds apply
    to it (`hpa_warnings` says so in that runtime's /debug)."""


def _deployment_of(labels: Mapping[str, Any]) -> str | None:
    """The runtime Deployment an HPA metric's selector names, by the same keys the adapter's API reads
    (`autoscaler.names`): a spelling of their own here would drift from what the API serves."""
    deployment = labels.get(SELECTOR_DEPLOYMENT)
    if isinstance(deployment, str) and deployment:
        return deployment
    runtime = labels.get(SELECTOR_SERVINGRUNTIME)
    if isinstance(runtime, str) and runtime:
        return SERVINGRUNTIME_DEPLOYMENT_PREFIX + runtime
    return None


def parse_hpa(obj: Mapping[str, Any]) -> HpaBounds | None:
    """The bounds of one HPA object as the API serves it; None when it is malformed or scales no runtime."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not isinstance(spec, Mapping):
        return None
    high = spec.get("maxReplicas")
    low = spec.get("minReplicas", 1)  # the API's default
    if not isinstance(high, int) or isinstance(high, bool) or high < 1:
        return None
    if not isinstance(low, int) or isinstance(low, bool) or low < 1:
        low = 1
    deployments: list[str] = []
    by_name: str | None = None  # the runtime a RuntimeScale target is named after, when no metric says
    target = spec.get("scaleTargetRef") or {}
    if isinstance(target, Mapping) and isinstance(target.get("name"), str):
        if target.get("kind") == "Deployment":
            deployments.append(target["name"])
        elif target.get("kind") == RUNTIME_SCALE_KIND:
            by_name = SERVINGRUNTIME_DEPLOYMENT_PREFIX + target["name"]
    targeted = len(deployments)  # names from the target, before the metrics' selectors
    for metric in spec.get("metrics") or ():
        if not isinstance(metric, Mapping) or metric.get("type") != "External":
            continue
        selector = ((metric.get("external") or {}).get("metric") or {}).get("selector") or {}
        labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
        found = _deployment_of(labels) if isinstance(labels, Mapping) else None
        if found is not None:
            deployments.append(found)
    if not deployments and by_name is not None:
        # A RuntimeScale's name is only a guess at its runtime (its `spec.servingRuntime` says, which the HPA
        # does not carry): used when no metric names the runtime, never beside one that does.
        deployments.append(by_name)
    if not deployments:
        return None
    keys = tuple(dict.fromkeys(RuntimeKey(namespace, d) for d in deployments))
    aimed = RuntimeKey(namespace, by_name) if by_name is not None and by_name not in deployments else None
    # Ours (a RuntimeScale target, or a metric that selects a runtime) rather than modelmesh-serving's own CPU
    # HPA, which has the Deployment's name by design.
    ours = by_name is not None or len(deployments) > targeted
    return HpaBounds(namespace, name, min(low, high), high, keys, ours and name in deployments, aimed)


def bounds_by_runtime(hpas: Iterable[HpaBounds], warned: set[RuntimeKey] | None = None,
                      warned_names: SaidOnce[tuple[str, str]] | None = None) -> dict[RuntimeKey, tuple[int, int]]:
    """(minReplicas, maxReplicas) per runtime; two HPAs on one runtime give the tighter bounds, with a
    warning (once per runtime when `warned` is kept by the caller), and an HPA of ours with
    modelmesh-serving's name for it gets a warning (once per HPA when `warned_names` is kept)."""
    result: dict[RuntimeKey, tuple[int, int]] = {}
    owners: dict[RuntimeKey, list[str]] = {}
    for hpa in sorted(hpas, key=lambda h: (h.namespace, h.name)):
        for key in hpa.runtimes:
            owners.setdefault(key, []).append(hpa.name)
            if key in result:
                low, high = result[key]
                result[key] = (max(low, hpa.min_replicas), min(high, hpa.max_replicas))
            else:
                result[key] = (hpa.min_replicas, hpa.max_replicas)
        if hpa.controller_name and (warned_names is None or warned_names.first_time((hpa.namespace, hpa.name))):
            log.warning("HPA %s/%s has the name of the runtime Deployment it scales, which is modelmesh-serving's: "
                        "while the ServingRuntime has no autoscaler class, its controller replaces this HPA with a "
                        "CPU HPA on the Deployment and then deletes it; give it another name (e.g. %s-autoscaler)",
                        hpa.namespace, hpa.name, hpa.name)
    for key, names in owners.items():
        if len(names) > 1 and (warned is None or key not in warned):
            log.warning("runtime %s is scaled by %d HPAs (%s); using the tighter bounds", key, len(names),
                        ", ".join(names))
            if warned is not None:
                warned.add(key)
    return result


LOGGED_CHANGES: Final = 10
"""Runtimes named in one log line of changed bounds; the rest are counted."""


def describe_changes(before: Mapping[RuntimeKey, tuple[int, int]], after: Mapping[RuntimeKey, tuple[int, int]],
                     gone: Mapping[RuntimeKey, str] | None = None) -> str:
    """What changed between two bounds tables, for one log line: the runtimes whose bounds changed (at most
    `LOGGED_CHANGES` named), never the whole fleet again at every HPA event. `gone`: why no HPA selects a runtime
    any more, where known (`hpa_selections.gone_reasons`): "no HPA any more" was said of a runtime whose HPA was
    there, selecting something else."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if new is None:
            why = None if gone is None else gone.get(key)
            changes.append(f"{key} no HPA selects it any more" + (f" ({why})" if why else ""))
        elif old is None:
            changes.append(f"{key} {new}")
        else:
            changes.append(f"{key} {old} -> {new}")
    if len(before) == 0 and len(changes) > LOGGED_CHANGES:
        return f"{len(after)} runtimes scaled by HPAs"
    return few(changes, LOGGED_CHANGES, more=" and {} more runtimes")


class HpaWatch:
    """Lists then watches the HPAs of the given namespaces (None: all); `bounds(key)` answers from memory."""

    def __init__(
        self,
        client: ClientFactory,
        namespaces: Sequence[str] | None,
        *,
        request_timeout_s: float = 10.0,
        watch_timeout_s: int = 60,
        backoff: Callable[[int], float] = RETRY_BACKOFF,
        health: WatchHealth | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`health` counts each watch's failures and says whether it is open (the adapter's metrics). `sleep` waits
        between attempts (tests play the waits on a clock of their own)."""
        self._session = KubeSession(client, "the HPA watch")
        self._scopes: tuple[Scope, ...] = tuple(dict.fromkeys(namespaces)) if namespaces else (None,)
        self._hpas: dict[Scope, dict[tuple[str, str], HpaBounds]] = {scope: {} for scope in self._scopes}
        self._table: dict[RuntimeKey, tuple[int, int]] = {}
        self._owners: dict[RuntimeKey, list[HpaBounds]] = {}
        """The HPAs selecting each runtime, as of the table: what the log line of a runtime left says they became."""
        self._astray: tuple[HpaBounds, ...] = ()
        """The HPAs worth a word in some runtime's /debug (`hpa_warnings`): those selecting a runtime another
        HPA selects too, and those whose metrics select another runtime than their RuntimeScale's."""
        self._selecting_none: dict[Scope, set[tuple[str, str]]] = {scope: set() for scope in self._scopes}
        """HPAs there that scale no runtime (`parse_hpa` None): not deleted, though their runtime lost them."""
        self._warned: set[RuntimeKey] = set()
        self._warned_names: SaidOnce[tuple[str, str]] = SaidOnce(GONE_HPAS_REMEMBERED)
        """The HPAs named like their runtime Deployment, warned about: those there, and the latest gone."""
        self.ok = False
        """False until every scope was listed, and while a watch is failing (bounds stay as last seen)."""
        self._ok: dict[Scope, bool] = dict.fromkeys(self._scopes, False)
        self._request_timeout_s = request_timeout_s
        self._spells = {scope: FailingSpell(failing=False) for scope in self._scopes}
        """Each scope's failure warned about and not yet cleared (`autoscaler.kube.failing_spell`)."""
        self._unanswered: set[Scope] = set(self._scopes)  # scopes whose first list neither came nor failed yet
        self._first_answers = asyncio.Event()
        self._loops = tuple(
            ListWatch(
                partial(self._endpoint, scope), "HPAs", scope,
                on_list=partial(self._replace, scope), on_event=partial(self._apply, scope),
                on_synced=partial(self._set_ok, scope, True), on_failure=partial(self._failed, scope),
                on_works=partial(self._works, scope),
                backoff=backoff, unanswered_backoff=partial(_unanswered_backoff, backoff),
                request_timeout_s=request_timeout_s, watch_timeout_s=watch_timeout_s,
                log=log, name=f"HPA watch of {scope_name(scope)}", sleep=sleep,
                health=None if health is None else LoopHealth(health, Watched.HPAS),
            )
            for scope in self._scopes
        )

    def warnings(self, known: Collection[RuntimeKey]) -> dict[RuntimeKey, tuple[str, ...]]:
        """The /debug warnings of the `known` runtimes (the refresh's) that the HPAs' selectors get wrong
        (`hpa_selections.selection_warnings`); nothing to do on the usual refresh, where no HPA is astray."""
        if not self._astray:
            return {}
        return selection_warnings(self._astray, self._owners, ChainMap(*self._hpas.values()).values(), known)

    def bounds(self, key: RuntimeKey) -> tuple[int | None, int | None]:
        """The (minReplicas, maxReplicas) of the HPA scaling `key`, or (None, None) when none does."""
        found = self._table.get(key)
        return (None, None) if found is None else found

    async def start(self) -> None:
        """Create the client, start one list + watch loop per namespace, and return once every first list
        answered or failed (at most the request timeout): a first refresh before the bounds are known would
        serve a value above an HPA's maxReplicas, which the design promises never to do."""
        if self._session.running:
            return
        await self._session.open()
        for loop in self._loops:
            self._session.spawn(flushed_when_stopped(loop.run(), WORKS_AGAIN, loop.scope),
                               f"kube-hpas-{loop.scope or 'all'}")
        try:
            async with asyncio.timeout(self._request_timeout_s):
                await self._first_answers.wait()
        except TimeoutError:
            log.warning("HPA watch: no first list within %.0f s; serving without the HPAs' bounds until it comes",
                        self._request_timeout_s)

    def _answered(self, scope: Scope) -> None:
        self._unanswered.discard(scope)
        if not self._unanswered:
            self._first_answers.set()

    async def close(self) -> None:
        await self._session.close()

    def _endpoint(self, scope: Scope, **options: Any) -> Awaitable[aiohttp.ClientResponse]:
        return collection_endpoint(self._session.client(), HPAS, scope)(**options)

    def _failed(self, scope: Scope, error: Exception, failures: int) -> None:
        self._answered(scope)
        if isinstance(error, KubeApiError) and self._spells[scope].failed(error):  # (a bug: `RetryGuard` says it)
            watch_news().say(FAILING, scope, error)
        self._set_ok(scope, False)

    def _works(self, scope: Scope) -> None:
        """The all-clear for the warning above, once, when the watch works (`ListWatch`'s rule), not at each
        open: one that breaks at once still fails."""
        if self._spells[scope].works():
            watch_news().say(WORKS_AGAIN, scope)

    def _set_ok(self, scope: Scope, ok: bool) -> None:
        if ok:
            self._answered(scope)
        self._ok[scope] = ok
        self.ok = all(self._ok.values())

    def _rebuild(self) -> None:
        every = ChainMap(*self._hpas.values())
        table = bounds_by_runtime(every.values(), self._warned, self._warned_names)
        owners = owners_by_runtime(every.values())
        if table != self._table:
            gone = gone_reasons(self._owners, every, set().union(*self._selecting_none.values()),
                                self._table.keys() - table.keys())
            log.info("HPA bounds (minReplicas, maxReplicas): %s", describe_changes(self._table, table, gone))
        self._table = table
        self._owners = owners
        self._astray = tuple(dict.fromkeys(
            [h for hpas in owners.values() if len(hpas) > 1 for h in hpas]
            + [h for h in every.values() if h.aimed is not None]))
        self._warned &= table.keys()  # a runtime gone from every HPA is warned about again if it comes back
        self._warned_names.keep(every)

    def _replace(self, scope: Scope, items: list[JSON]) -> None:
        hpas: dict[tuple[str, str], HpaBounds] = {}
        selecting_none = set()
        for item in items:
            parsed = parse_hpa(item)
            if parsed is not None:
                hpas[(parsed.namespace, parsed.name)] = parsed
            else:
                meta = item.get("metadata") or {}
                selecting_none.add((str(meta.get("namespace")), str(meta.get("name"))))
        self._hpas[scope] = hpas
        self._selecting_none[scope] = selecting_none
        self._rebuild()

    def _apply(self, scope: Scope, kind: str, obj: JSON) -> None:
        meta = obj.get("metadata") or {}
        ref = (str(meta.get("namespace")), str(meta.get("name")))
        parsed = parse_hpa(obj)
        hpas = self._hpas[scope]
        if kind == "DELETED" or parsed is not None:
            self._selecting_none[scope].discard(ref)
        else:
            self._selecting_none[scope].add(ref)
        if kind == "DELETED" or parsed is None:
            if hpas.pop(ref, None) is None:
                return
        elif hpas.get(ref) == parsed:
            # Most events are the HPA controller writing its status: nothing here changed. Rebuilding the table
            # of every HPA for each of them cost 23 ms an event at 5,000 HPAs.
            return
        else:
            hpas[ref] = parsed
        self._rebuild()
