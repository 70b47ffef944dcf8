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
it notes anything (`autoscaler.sources.recreated_runtimes`), and a runtime gone when discovery stops listing it.
"""

from __future__ import annotations

from typing import Protocol

from autoscaler.model import RuntimeKey


class ForgetsRuntimes(Protocol):
    """Something that keeps what it learned of each runtime from one refresh to the next."""

    def forget(self, key: RuntimeKey) -> None:
        """Drop all it keeps of `key`, as for a runtime never seen: it is gone, or another object now."""
        ...
