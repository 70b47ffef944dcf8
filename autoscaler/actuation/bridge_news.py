"""The replica bridge's lines about what one pass wrote to runtimes: replicas carried and replicas adopted.

A RuntimeScale's write is worth a line one at a time: `RuntimeScale ml/triton: ServingRuntime triton
spec.replicas 2 -> 3`. But a pass writes to many at once in two ordinary events: the bridge installed on a running
fleet (the shipped RuntimeScale has no `spec.replicas`, so the first pass adopts every runtime's: a line per
RuntimeScale was 1,000 lines at 1,000 runtimes), and a swing in load that scales hundreds of runtimes together
(200 lines up, 200 down). So the pass collects them and `flush` says them as `autoscaler.transition_log` says a
refresh's changed runtimes: one line each up to `NAMED` of a kind, else one line with the count and the first few
(`autoscaler.log_lists`); which RuntimeScales exactly is in their `status` and `kubectl get runtimescales`.
"""

from __future__ import annotations

import logging

from autoscaler.actuation.bridge_owners import ScaleId
from autoscaler.log_lists import NAMED, few

log = logging.getLogger("autoscaler.actuation.bridge")


class PassWrites:
    """Collects one pass's carried (`carried`) and adopted (`adopted`) replicas, then logs them (`flush`)."""

    def __init__(self) -> None:
        self._carried: list[tuple[ScaleId, str, int | None, int]] = []
        self._adopted: list[tuple[ScaleId, int]] = []

    def carried(self, key: ScaleId, runtime: str, found: int | None, wanted: int) -> None:
        """RuntimeScale `key`'s replicas written to ServingRuntime `runtime`, which had `found`."""
        self._carried.append((key, runtime, found, wanted))

    def adopted(self, key: ScaleId, replicas: int) -> None:
        """RuntimeScale `key` given its runtime's `replicas` (it was created without `spec.replicas`)."""
        self._adopted.append((key, replicas))

    def flush(self) -> None:
        adopted, carried = self._adopted, self._carried
        self._adopted, self._carried = [], []
        if len(adopted) <= NAMED:
            for (namespace, name), replicas in adopted:
                log.info("RuntimeScale %s/%s: spec.replicas adopted from the runtime: %d", namespace, name, replicas)
        else:
            log.info("%d RuntimeScales: spec.replicas adopted from their runtimes: %s", len(adopted),
                     few([f"{namespace}/{name} ({replicas})" for (namespace, name), replicas in adopted]))
        if len(carried) <= NAMED:
            for (namespace, name), runtime, found, wanted in carried:
                log.info("RuntimeScale %s/%s: ServingRuntime %s spec.replicas %s -> %d", namespace, name, runtime,
                         found, wanted)
        else:
            log.info("%d RuntimeScales: replicas carried to their ServingRuntimes' spec.replicas: %s", len(carried),
                     few([f"{namespace}/{name} ({found} -> {wanted})"
                          for (namespace, name), _, found, wanted in carried]))
