"""Pod discovery's lines about runtimes read by name between two resyncs: added, removed, replicas changed.

A runtime whose pods go to none or come from none has its Deployment read by name at once
(`autoscaler.sources.kube_deployments`), and what the read finds is worth a line: `runtime NS/DEPLOYMENT removed
(its Deployment is gone)`. One at a time that is the line to read. But runtimes come and go together: a GitOps
prune of an application deletes its 40 runtimes at once, and a new tenant's are applied together; a line per
runtime was 40 lines in a few seconds, until the resync found the rest in one. So the reads' findings are kept
while more reads are queued (`DeploymentResync.run_rereads` flushes once the queue has stayed empty for one read
interval, or `HELD` findings are waiting) and said as `autoscaler.transition_log` says a refresh's changed
runtimes: one line each up to `NAMED` of a kind, else one line with the count and the first few named.
"""

from __future__ import annotations

import logging
from typing import Final

from autoscaler.log_lists import say_each_or_counted
from autoscaler.model import RuntimeKey

log = logging.getLogger("autoscaler.sources.kube_pods")

HELD: Final = 500
"""Findings kept at most before they are said, however long reads stay queued (a read every few hundredths of a
second, for ever, would otherwise hold them for ever)."""


class RereadNews:
    """Collects what reads by name found (`added`, `removed`, `rescaled`), then logs it (`flush`)."""

    def __init__(self) -> None:
        self._added: list[RuntimeKey] = []
        self._removed: list[RuntimeKey] = []
        self._rescaled: list[tuple[RuntimeKey, int | None, int | None]] = []

    def __len__(self) -> int:
        return len(self._added) + len(self._removed) + len(self._rescaled)

    def added(self, key: RuntimeKey) -> None:
        """Runtime `key`, not in the table, found: its pods appeared."""
        self._added.append(key)

    def removed(self, key: RuntimeKey) -> None:
        """Runtime `key`'s Deployment found gone."""
        self._removed.append(key)

    def rescaled(self, key: RuntimeKey, before: int | None, after: int | None) -> None:
        """Runtime `key`'s `spec.replicas` found changed (modelmesh-serving scaled it to zero, or back)."""
        self._rescaled.append((key, before, after))

    def flush(self) -> None:
        added, removed, rescaled = self._added, self._removed, self._rescaled
        self._added, self._removed, self._rescaled = [], [], []
        say_each_or_counted(log, added, lambda key: f"Kubernetes discovery: runtime {key} added (its pods appeared)",
                            lambda count, keys: f"Kubernetes discovery: {count} runtimes added (their pods "
                                                f"appeared): {keys}")
        say_each_or_counted(log, removed,
                            lambda key: f"Kubernetes discovery: runtime {key} removed (its Deployment is gone)",
                            lambda count, keys: f"Kubernetes discovery: {count} runtimes removed (their "
                                                f"Deployments are gone): {keys}")
        say_each_or_counted(log, rescaled,
                            lambda change: f"Kubernetes discovery: runtime {change[0]} replicas {change[1]} -> "
                                           f"{change[2]} (read again as its pods changed)",
                            lambda count, keys: f"Kubernetes discovery: {count} runtimes' replicas changed (read "
                                                f"again as their pods changed): {keys}",
                            lambda change: f"{change[0]} ({change[1]} -> {change[2]})")
