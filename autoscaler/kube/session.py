"""`KubeSession`: the `kubernetes.aio` API client a group of background loops shares, made when they start and
closed when they stop. Pod discovery and the HPA watch each own one.

The client is made by a factory, called at `open()`, so building the app stays synchronous and a broken
kubeconfig surfaces from `start()`; until then, and after `close()`, asking for the client is a `KubeApiError`
(which the loops retry like any other failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kubernetes.aio.client import ApiClient

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.exec_plugin import end_renewal
from autoscaler.kube.raw import describe
from exporter.stopping import stop_tasks

ClientFactory = Callable[[], "ApiClient | Awaitable[ApiClient]"]
"""Makes the API client when the loops start; may be async (loading a kubeconfig is)."""


class KubeSession:
    """One API client and the tasks that use it; `open()`, `spawn()` each loop, `close()` stops them all."""

    def __init__(self, factory: ClientFactory, owner: str) -> None:
        """`owner` names the user in the error for a client asked for before `open()` ("discovery")."""
        self._factory = factory
        self._owner = owner
        self._api: ApiClient | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def running(self) -> bool:
        """True from the first `spawn()` until `close()`."""
        return bool(self._tasks)

    async def open(self) -> None:
        """Make the client; a factory that fails raises `KubeApiError` (its own, or one wrapping its error)."""
        try:
            made = self._factory()
            self._api = await made if inspect.isawaitable(made) else made
        except KubeApiError:
            raise
        except Exception as error:
            raise KubeApiError(f"cannot create the Kubernetes client: {describe(error)}") from error

    def client(self) -> ApiClient:
        """The open client; `KubeApiError` when there is none."""
        if self._api is None:
            raise KubeApiError(f"{self._owner} is not started")
        return self._api

    def spawn(self, loop: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `loop` in the background until `close()`."""
        task = asyncio.create_task(loop, name=name)
        self._tasks.append(task)
        return task

    async def close(self) -> None:
        """Stop every loop (cancelled again while one goes on: `stop_tasks`), then close the client; safe to
        call twice."""
        tasks, self._tasks = self._tasks, []
        await stop_tasks(tasks)
        if self._api is not None:
            api, self._api = self._api, None
            with contextlib.suppress(Exception):
                await end_renewal(api.configuration)  # an exec plugin run under way, and its processes
                await api.close()  # type: ignore[no-untyped-call]
