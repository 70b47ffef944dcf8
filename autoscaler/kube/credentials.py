"""Keeping a kubeconfig user's bearer token current while the adapter runs.

`kubernetes.aio` reads a kubeconfig's credentials once, at load: a `tokenFile` (how a projected service-account
token reaches a process outside its pod) is never read again, and an exec plugin's token (`aws eks get-token`,
`gke-gcloud-auth-plugin`, `kubelogin`, valid 15 to 60 minutes) is never fetched again. kubectl and every
client-go program refresh both, so a user expects the adapter to; without it each call answered 401
Unauthorized from the moment the first token expired until a restart. (In a cluster the library's own hook
reads the service-account token file again every minute: nothing to do there.)

`watch_credentials` installs the library's `refresh_api_key_hook`, which every request awaits before it is
sent: a `tokenFile` is read again when it changed (`autoscaler.kube.token_file`); an exec plugin runs again once
its token is within the library's five minutes of expiry, at most every `EXEC_RETRY_S` while it keeps failing.
When a new token cannot be had, requests go out with the last one (it may still be valid) and the reason is logged once
per change, as a WARNING.

An exec plugin that answers with a client certificate instead of a token is renewed by `client_certificate`.

The loader's per-user state is private to the library (`_user`, `exec_plugin_expiry`): read here only, so a
library that changes it leaves the adapter as it was before (no refresh), never broken.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes.aio import client

from autoscaler.kube.client_certificate import watch_client_certificate
from autoscaler.kube.token_file import RefreshWarnings, TokenFile

EXEC_RETRY_S: Final = 10.0
"""After a failed exec plugin run, how long requests use the last token before the plugin runs again."""


@dataclass(frozen=True, slots=True)
class TokenRefresh:
    """Where `watch_credentials` keeps the bearer token current from, for clients that do without the library
    (`autoscaler.kube.review_connection`): neither for a token given once, or none."""

    file: Path | None = None
    """The kubeconfig user's `tokenFile`, read again when it changes."""
    plugin: bool = False
    """The exec plugin, which only the library runs."""


def watch_credentials(loader: Any, configuration: client.Configuration) -> TokenRefresh:
    """Refresh `configuration`'s bearer token from the kubeconfig user `loader` (the library's
    `KubeConfigLoader`, as `load_kube_config` returns it) chose, when it reads one from a file or a plugin."""
    user = getattr(loader, "_user", None)
    if user is None or not hasattr(user, "value") or not isinstance(user.value, dict):
        return TokenRefresh()
    entry: dict[str, Any] = user.value
    if "exec" in entry and watch_client_certificate(loader, configuration):
        return TokenRefresh()  # the plugin answered with a client certificate, not a token
    if "exec" in entry and hasattr(loader, "exec_plugin_expiry") and hasattr(loader, "load_from_exec_plugin"):
        configuration.refresh_api_key_hook = _ExecToken(loader)  # type: ignore[assignment]
        return TokenRefresh(plugin=True)
    if not entry.get("token") and isinstance(entry.get("tokenFile"), str) and entry["tokenFile"]:
        path = Path(entry["tokenFile"])
        if not path.is_absolute() and getattr(user, "path", None):
            path = Path(os.path.abspath(os.path.dirname(str(user.path)))) / path  # as the library resolves it
        configuration.refresh_api_key_hook = _FileToken(path)  # type: ignore[assignment]
        return TokenRefresh(file=path)
    return TokenRefresh()


class _FileToken:
    """The library's refresh hook for a `tokenFile` (`autoscaler.kube.token_file`)."""

    def __init__(self, path: Path) -> None:
        self._file = TokenFile(path)

    def __call__(self, configuration: client.Configuration) -> None:
        token = self._file.token()
        if token is not None:
            configuration.api_key["BearerToken"] = f"Bearer {token}"


class _ExecToken:
    """An exec plugin's token, fetched again once the library counts it as expired."""

    def __init__(self, loader: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._loader = loader
        self._clock = clock
        self._lock = asyncio.Lock()  # concurrent requests that find the token expired run the plugin once
        self._next_try = -float("inf")
        self._warnings = RefreshWarnings("token of the kubeconfig's exec plugin")

    async def __call__(self, configuration: client.Configuration) -> None:
        if self._clock() < self._next_try:
            return
        async with self._lock:
            if self._clock() < self._next_try:
                return
            try:
                # True at once while the token is not within five minutes of its expiry; None when the plugin
                # failed (the library logs that itself and keeps the last token).
                fetched = await self._loader.load_from_exec_plugin()
            except Exception as error:  # the library's errors end here: requests go on with the last token
                fetched = f"{type(error).__name__}: {error}"
            if fetched is not True:
                self._failed(fetched if isinstance(fetched, str) else "the plugin failed (see the log line above)")
                return
            token = getattr(self._loader, "token", None)
            if isinstance(token, str) and token:
                configuration.api_key["BearerToken"] = token
            self._warnings.recovered()

    def _failed(self, reason: str) -> None:
        self._next_try = self._clock() + EXEC_RETRY_S
        self._warnings.failed(reason)
