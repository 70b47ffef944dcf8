"""A `PodDiscovery` over a fixed inventory, for source tests that need no targets file or Kubernetes.

Tests build it from plain pod names, then change it (`set_runtime`, `healthy`) between refreshes to play
pods coming, going and turning unready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory


class StaticDiscovery:
    """Holds whatever inventory the test gives it; no I/O."""

    def __init__(self, runtimes: Iterable[RuntimeInventory] = (), *, healthy: bool = True) -> None:
        self._runtimes = {runtime.key: runtime for runtime in runtimes}
        self._healthy = healthy

    @classmethod
    def of(
        cls, pods: Mapping[tuple[str, str], Iterable[str]], *, not_ready: Iterable[str] = ()
    ) -> StaticDiscovery:
        """`{(namespace, deployment): [pod, ...]}`; pods named in `not_ready` are not Ready."""
        unready = set(not_ready)
        return cls(
            RuntimeInventory(
                key=RuntimeKey(namespace, deployment),
                pods=tuple(PodTarget(name=name, ready=name not in unready, url=None) for name in names),
            )
            for (namespace, deployment), names in pods.items()
        )

    @property
    def healthy(self) -> bool:
        return self._healthy

    @healthy.setter
    def healthy(self, value: bool) -> None:
        self._healthy = value

    def healthy_for(self, namespace: str) -> bool:
        return self._healthy

    def set_runtime(self, runtime: RuntimeInventory) -> None:
        self._runtimes[runtime.key] = runtime

    async def start(self) -> None:
        return None

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        return dict(self._runtimes)

    async def close(self) -> None:
        return None
