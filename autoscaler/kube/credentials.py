"""Keeping a kubeconfig user's bearer token current while the adapter runs.

`kubernetes.aio` reads a kubeconfig's credentials once, at load: a `tokenFile` (how a projected service-account
token reaches a process outside its pod) is never read again, and an exec plugin's token (`aws eks get-token`,
`gke-gcloud-auth-plugin`, `kubelogin`, valid 15 to 60 minutes) is never fetched again. kubectl and every
client-go program refresh both, so a user expects the adapter to; without it each call answered 401
Unauthorized from the moment the first token expired until a restart. (In a cluster the library's own hook
reads the service-account token file again every minute: nothing to do there.)

`watch_credentials` installs the library's `refresh_api_key_hook`, which every request awaits before it is
sent: a `tokenFile` is read again when it changed (`autoscaler.kube.token_file`); an exec plugin runs again once
its token is within five minutes of its expiry (`expirationTimestamp`), or a fifth of its lifetime when that is
shorter (the pace a client certificate keeps, `autoscaler.kube.renewal_pace`: a 5-minute token ran the plugin at
every request), and a token without one five minutes after it came; at most every `EXEC_RETRY_S` while it keeps
failing; and after a 401 Unauthorized to it (`autoscaler.kube.unauthorized`: a token revoked or rotated early, as
kubectl does; only a 401 to the token in use), at most every `EXEC_RETRY_S`, said once (`refused_again`) when the
plugin hands out the refused token again (which then counts as taken until the next 401: the 401 may not have been
the token's). Requests sent while a run that a
401 started is under way wait for it rather than go out with the refused token. The plugin runs as the library runs
it, but as a task of its own (`exec_plugin.PluginRun`): while the current token is still valid, requests go out
with it and do not wait for the run (the library's hook waited, outside aiohttp's request timeout, and a hung
plugin held the Lease renewal for minutes); a request with no valid token waits for it, at most
`exec_plugin.SLOW_RUN_S`, and a run longer than that is said once, naming the plugin's command. A request that
gives up (its deadline, the adapter stopping) leaves the run to finish for the next, and closing the API client
(`exec_plugin.end_renewal`) kills it and what it started; through the library, a cancelled request left the
plugin running, and the next request started another. When a new token cannot be had, requests go out with the
last one (it may still be valid) and the reason is logged once per change, as a WARNING.

An exec plugin that answers with a client certificate instead of a token is renewed by `client_certificate`.

The loader's per-user state is private to the library (`_user`, `token`, `exec_plugin_expiry`): read here once,
at load, so a library that changes it leaves the adapter as it was before (no refresh), never broken.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
from kubernetes.aio import client

from autoscaler.kube import client_certificate
from autoscaler.kube.client_certificate import watch_client_certificate
from autoscaler.kube.exec_plugin import PluginRun, plugin_command, run_exec_plugin
from autoscaler.kube.raw import describe
from autoscaler.kube.refused_again import RefusedAgain
from autoscaler.kube.renewal_pace import RenewalPace
from autoscaler.kube.timestamps import posix_seconds
from autoscaler.kube.token_file import RefreshWarnings, TokenFile
from autoscaler.kube.unauthorized import on_unauthorized


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
    token, expiry = getattr(loader, "token", None), getattr(loader, "exec_plugin_expiry", None)
    if "exec" in entry and isinstance(token, str) and token and isinstance(expiry, datetime):
        hook = _ExecToken(loader._user["exec"], token, expiry.timestamp())
        configuration.refresh_api_key_hook = hook  # type: ignore[assignment]
        configuration.trace_configs = [*(configuration.trace_configs or []), hook.trace_config()]
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
    """An exec plugin's token, fetched again once it is within `RENEW_BEFORE_S` of its expiry (the library's
    skew) or a fifth of its lifetime when shorter (`renewal_time`), or `RENEW_BEFORE_S` after it came when it
    states no expiry, as the library's `load_from_exec_plugin` did: the same run, the same `Bearer` token; or
    once the API server answered a request that carried it 401 Unauthorized (revoked or rotated early), at most
    every `EXEC_RETRY_S`: the pace `client_certificate` keeps (`renewal_pace.RenewalPace`). Until the expiry
    itself, and unless refused, requests go out with the current token while the run goes on."""

    def __init__(self, exec_config: Any, authorization: str, expiry: float,
                 clock: Callable[[], float] | None = None) -> None:
        """`authorization`: the `Bearer ...` the library read at load, valid until `expiry` (Unix time).
        `clock`: wall-clock time, `client_certificate.CLOCK` (which tests step) unless given."""
        self._exec_config = exec_config
        self._authorization = authorization
        self._clock = clock or (lambda: client_certificate.CLOCK())
        self.pace = RenewalPace(self._clock, expiry)
        self._command = plugin_command(exec_config)
        self._refused_again = RefusedAgain(self._command, "token", "answers 401 Unauthorized to")
        self._warnings = RefreshWarnings("token of the kubeconfig's exec plugin")
        self.plugin_run = PluginRun(self._renew, "exec-plugin-token", command=self._command,
                                    credential="token")
        """Ended by `exec_plugin.end_renewal`, which finds it here, as the API client closes."""

    def trace_config(self) -> aiohttp.TraceConfig:
        """The requests' trace by which a 401 to the current token makes the plugin run again."""
        trace = aiohttp.TraceConfig()
        on_unauthorized(trace, self._on_unauthorized)
        return trace

    async def __call__(self, configuration: client.Configuration) -> None:
        await self.pace.before_request(self.plugin_run)
        configuration.api_key["BearerToken"] = self._authorization

    def _on_unauthorized(self, params: aiohttp.TraceRequestEndParams, _ctx: SimpleNamespace) -> None:
        # Only a 401 to the token in use: one to a token already replaced (a request answered after the run)
        # says nothing of the new one.
        if params.headers.get("Authorization") == self._authorization:
            self.pace.refused = True

    async def _renew(self) -> str | None:
        self.pace.run_started()
        try:
            token, expiry = _token_in(await run_exec_plugin(self._exec_config))
        except Exception as error:  # the library's and the plugin's errors end here: requests use the last token
            self.pace.run_failed()
            reason = describe(error)
            self._warnings.failed(reason)
            return reason
        authorization = f"Bearer {token}"
        # The same token: taken again until the next 401 (which runs the plugin after EXEC_RETRY_S), as the 401 may
        # not have been the token's; kept refused, every request waited for a run every EXEC_RETRY_S.
        self._refused_again.renewed(refused=self.pace.refused, same=authorization == self._authorization)
        self._authorization = authorization
        self.pace.renewed(expiry)  # no expiry: asked for again after RENEW_BEFORE_S, or at a 401
        self._warnings.recovered()
        return None


def _token_in(status: Mapping[str, Any]) -> tuple[str, float | None]:
    """The token and expiry (None: not stated) a plugin's `status` holds; ValueError when it has no token."""
    token, stated = status.get("token"), status.get("expirationTimestamp")
    if not isinstance(token, str) or not token:
        raise ValueError("the plugin's answer has no token")
    if not stated:
        return token, None
    expiry = posix_seconds(stated)
    if expiry is None:
        raise ValueError(f"the plugin's expirationTimestamp {stated!r} is not a time")
    return token, expiry
