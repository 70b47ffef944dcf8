"""What remembers a runtime between refreshes, and forgets it when it is no longer the same runtime.

A runtime is forgotten in two cases: it is gone (its Deployment deleted, or no longer served), and it was
created again under its name (a new Deployment uid: `kubectl replace --force`, a GitOps replace, a quick helm
uninstall and install). The second is another object, whose memory starts again. Each part that keeps
something per runtime (the refresher's memory and warm-up, the policy annotations' last good values, the ranking
hold's spells, the deletion-cost writer's scale-downs, the log lines' memory) says how to forget it
(`ForgetsRuntimes`), and the refresher lists them in one place (`Refresher.runtime_memories`) and forgets a
runtime from all of them in both cases: a part that forgot only the gone ones kept, for a runtime created within
one refresh, what the deleted object had asked for (a `min-replicas` floor the new Deployment never set).

A metric source keeps per-runtime memory too (the Prometheus source: since when none of a runtime's Ready pods has
had series). It is not in that list: the refresher learns of a new uid from the snapshots, after the source has
read and noted them, so the source forgets a runtime created again itself, from the inventory it reads, before
it notes anything (`RecreatedRuntimes`, which the refresher asks as well), and a runtime gone when discovery
stops listing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from autoscaler.model import RuntimeKey


class ForgetsRuntimes(Protocol):
    """Something that keeps what it learned of each runtime from one refresh to the next."""

    def forget(self, key: RuntimeKey) -> None:
        """Drop all it keeps of `key`, as for a runtime never seen: it is gone, or another object now."""
        ...


class RecreatedRuntimes:
    """The Deployment uid each runtime had at the last look (where discovery reads one: Kubernetes), to tell a
    runtime created again under its name: the refresher asks from its snapshots, a source from the inventory it
    reads, each before it reads or notes anything of the runtime."""

    def __init__(self) -> None:
        self._uids: dict[RuntimeKey, str] = {}

    def created_again(self, uids: Iterable[tuple[RuntimeKey, str | None]]) -> dict[RuntimeKey, str]:
        """The runtimes of `uids` whose uid is not the one the last look had, each with the uid it had then; then
        remember these uids. A runtime without a uid (a targets file) is never created again; one not listed
        before is new, not created again (what keeps runtimes forgets the ones gone anyway)."""
        now = {key: uid for key, uid in uids if uid is not None}
        again = {key: was for key, uid in now.items() if (was := self._uids.get(key, uid)) != uid}
        self._uids = now
        return again
