"""Which runtimes of a source's inventory are another object under a name it knew (`autoscaler.forgetting`).

A source keeps some things per runtime from one refresh to the next (the Prometheus source: since when none of
a runtime's Ready pods has had series, and whether the log said so). A Deployment deleted and created again
under its name (a new uid) is another runtime, and what the source kept of the old one is not the new one's:
kept, the new object's pods were named "not scraped" at once, on the old ones' time. The refresher learns of a
new uid from the snapshots, after the source has read and noted them, too late for the source's own memory;
so the source asks here, before it notes anything, from the inventory it reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import RuntimeInventory


class RecreatedRuntimes:
    """The Deployment uid each runtime had at the last inventory (where discovery reads one: Kubernetes)."""

    def __init__(self) -> None:
        self._uids: dict[RuntimeKey, str] = {}

    def created_again(self, inventory: Mapping[RuntimeKey, RuntimeInventory]) -> list[RuntimeKey]:
        """The runtimes of `inventory` whose uid is not the one the last inventory had; then remember these uids.
        A runtime without a uid (a targets file) is never created again; one not listed before is new, not
        created again (a source forgets the runtimes gone anyway)."""
        again = [key for key, runtime in inventory.items()
                 if runtime.uid is not None and self._uids.get(key, runtime.uid) != runtime.uid]
        self._uids = {key: runtime.uid for key, runtime in inventory.items() if runtime.uid is not None}
        return again
