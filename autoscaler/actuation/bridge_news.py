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
from autoscaler.log_lists import say_each_or_counted

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
        def adopted_one(write: tuple[ScaleId, int]) -> str:
            (namespace, name), replicas = write
            return f"RuntimeScale {namespace}/{name}: spec.replicas adopted from the runtime: {replicas}"

        def adopted_shown(write: tuple[ScaleId, int]) -> str:
            (namespace, name), replicas = write
            return f"{namespace}/{name} ({replicas})"

        def carried_one(write: tuple[ScaleId, str, int | None, int]) -> str:
            (namespace, name), runtime, found, wanted = write
            return (f"RuntimeScale {namespace}/{name}: ServingRuntime {runtime} spec.replicas "
                    f"{shown_replicas(found)} -> {wanted}")

        def carried_shown(write: tuple[ScaleId, str, int | None, int]) -> str:
            (namespace, name), _, found, wanted = write
            return f"{namespace}/{name} ({shown_replicas(found)} -> {wanted})"

        say_each_or_counted(log, adopted, adopted_one, lambda count, scales: (
            f"{count} RuntimeScales: spec.replicas adopted from their runtimes: {scales}"), adopted_shown)
        say_each_or_counted(log, carried, carried_one, lambda count, scales: (
            f"{count} RuntimeScales: replicas carried to their ServingRuntimes' spec.replicas: {scales}"),
            carried_shown)


def shown_replicas(replicas: int | None) -> str:
    """A ServingRuntime's `spec.replicas` as its YAML shows it to the user: absent is `unset`, not Python's None."""
    return "unset" if replicas is None else str(replicas)
