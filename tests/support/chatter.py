"""A busy namespace for watch tests: one pod changed every 10 ms, so every watch has an event to carry as soon as
it opens (status chatter on a large cluster), as a proxy that breaks each stream after its first bytes needs."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

from tests.fakes.kube import JSON, FakeKubeApi
from tests.support.background import in_background

EVERY_S = 0.01


@contextlib.asynccontextmanager
async def chattering_pod(
    kube: FakeKubeApi, namespace: str, labels: dict[str, str], name: str = "chatter"
) -> AsyncIterator[None]:
    """Add pod `name` with `labels` and change one of its annotations every `EVERY_S` while the block runs."""
    kube.add_pod(namespace, name, labels=labels)

    async def chatter() -> None:
        for n in itertools.count():

            def mutate(pod: JSON, n: int = n) -> None:
                pod["metadata"].setdefault("annotations", {})["chatter"] = str(n)

            kube.update_object("pods", namespace, name, mutate)
            await asyncio.sleep(EVERY_S)

    async with in_background(chatter()):
        yield
