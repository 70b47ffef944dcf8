"""What a Kubernetes call waited on before it went out: the run of the kubeconfig's exec plugin for its token or
client certificate (`exec_plugin.PluginRun.join`), up to `exec_plugin.SLOW_RUN_S` when no valid credential is left.

A caller with a deadline of its own (the Lease renewal's 3 s) reported "no answer within 3.0 s" when the time went
on the plugin, and the API server was blamed for a call that was never sent. The caller notes the waits of its
calls (`noting_plugin_waits`) and says what it waited on (`PluginWaits.said`). The note is a context variable
holding one mutable record: the request's code runs in the caller's task, or in a task that copies the caller's
context (`asyncio.wait_for`), and either way writes to the caller's record.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class PluginWaits:
    """The plugin runs the calls of one attempt waited on."""

    command: str | None = None
    """The plugin's command (`plugin_command`), as the kubeconfig names it; None: no call waited on a plugin."""
    credential: str = ""
    """What the run renews: "token", "client certificate"."""
    cut_short: bool = False
    """The caller gave up (its deadline) while a call still waited for the plugin, before it went out."""

    def said(self) -> str:
        """What to add to the caller's "no answer within N s": the plugin that held the call, if one did."""
        if self.command is None:
            return ""
        which = f"the kubeconfig's exec plugin {self.command} (to renew the {self.credential})"
        if self.cut_short:
            return (f": the call waited all that time for {which} and was not sent (the lines \"Kubernetes "
                    "credentials: ...\" say why the plugin is slow; run it by hand)")
        return f", part of it spent waiting for {which}"


_WAITS: ContextVar[PluginWaits | None] = ContextVar("plugin_waits", default=None)


@contextlib.contextmanager
def noting_plugin_waits() -> Iterator[PluginWaits]:
    """Note the plugin runs the calls made within wait on, in the record yielded."""
    waits = PluginWaits()
    token = _WAITS.set(waits)
    try:
        yield waits
    finally:
        _WAITS.reset(token)


@contextlib.contextmanager
def waiting_for_plugin(command: str, credential: str) -> Iterator[None]:
    """A call waits for the run of the plugin `command` renewing its `credential`: noted for the caller, if it
    notes them, with whether the caller gave up meanwhile."""
    waits = _WAITS.get()
    if waits is not None:
        waits.command, waits.credential = command, credential
    try:
        yield
    except asyncio.CancelledError:
        if waits is not None:
            waits.cut_short = True
        raise
