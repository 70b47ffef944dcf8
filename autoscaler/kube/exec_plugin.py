"""Runs of a kubeconfig exec plugin (client.authentication.k8s.io) that end their processes when they are ended.

`kubernetes.aio`'s `ExecProvider.run` starts the plugin and awaits its output, and a cancel (the adapter
stopping, the API client closed, the request that asked giving up) leaves the process running: a plugin waiting
on a remote CA or on a login outlived the adapter. The run here is the library's (the command, arguments and
environment as it reads them from the kubeconfig, the same `KUBERNETES_EXEC_INFO`, the same checks of the answer
and the same errors), except that the plugin starts in a session of its own and a cancelled run kills that whole
process group and reaps the plugin before the cancel goes on: a plugin is often a shell wrapper that runs the
real one as its child (`sh -c 'aws eks get-token ...'`), which killing the shell alone left running.

`PluginRun` is the one run under way for a plugin's credential, whether a token (`credentials`) or a client
certificate (`client_certificate`): a task of its own, not the request's that found the credential due, so a
request that gives up leaves the run to finish for the next, and closing the API client (`end_renewal`) ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from kubernetes.aio.config.config_exception import ConfigException
from kubernetes.aio.config.exec_provider import ExecProvider


async def run_exec_plugin(exec_config: Any) -> dict[str, Any]:
    """The `status` of the ExecCredential the plugin `exec_config` (a kubeconfig user's `exec`) prints;
    `ConfigException` when it fails or prints no such credential."""
    plugin = ExecProvider(exec_config)  # type: ignore[no-untyped-call]  # reads command, args, env as at load
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": sys.stdout.isatty()}}
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *plugin.args, env={**plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}, stdin=None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True))
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:  # cancelled while it starts (asyncio would kill the shell of a wrapper only)
        with contextlib.suppress(Exception):  # one that failed to start has nothing to end
            await _end(await asyncio.shield(starting))
        raise
    try:
        stdout, stderr = await process.communicate()
    except BaseException:  # cancelled: nobody waits for its answer any more
        await _end(process)
        raise
    if process.returncode != 0:
        detail = stderr.decode(errors="replace").strip()
        raise ConfigException(f"exec: process returned {process.returncode}" + (f". {detail}" if detail else ""))
    try:
        answer = json.loads(stdout)
    except ValueError as error:
        raise ConfigException(f"exec: failed to decode process output: {error}") from error
    if not isinstance(answer, dict):
        raise ConfigException("exec: malformed response: not an ExecCredential")
    for key in ("apiVersion", "kind", "status"):
        if key not in answer:
            raise ConfigException(f"exec: malformed response. missing key '{key}'")
    if answer["apiVersion"] != plugin.api_version:
        raise ConfigException(f"exec: plugin api version {answer['apiVersion']} does not match {plugin.api_version}")
    status: dict[str, Any] = answer["status"]
    return status


async def _end(process: asyncio.subprocess.Process) -> None:
    """Kill the plugin's process group (the plugin and whatever it started that is still in its group) and reap
    the plugin. The group outlives its leader while a member runs, and its id is not given to another process
    until the last is gone."""
    with contextlib.suppress(ProcessLookupError):  # every process of the group has ended
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()  # reaped, not a zombie


class PluginRun:
    """The plugin run under way for one credential, shared by the requests that find it due, as a task of its
    own: a request that gives up (its deadline, its task cancelled) leaves the run to finish for the next one,
    which then need not start the plugin again; `end()` ends it and the plugin's processes."""

    def __init__(self, renew: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """`renew`: one run of the plugin and what becomes of its answer; it keeps its own errors."""
        self._renew = renew
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        """The run under way, or a new one."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._renew(), name=self._name)
        return self._task

    async def wait(self) -> None:
        """Start the run, or join the one under way, and wait until it ends (also when `end()` ends it). A caller
        cancelled meanwhile leaves the run going."""
        await asyncio.wait([self.start()])

    async def end(self) -> None:
        """End the run under way, if any: its plugin killed and reaped."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])


async def end_renewal(configuration: Any) -> None:
    """An API client made from `configuration` is closing: end the plugin run under way for its token or client
    certificate, if any, and the plugin's processes. A client of the same configuration still open runs the
    plugin again when it next finds its credential due."""
    holders = [*(getattr(configuration, "trace_configs", None) or ()),
               getattr(configuration, "refresh_api_key_hook", None)]
    for holder in holders:
        run = getattr(holder, "plugin_run", None)
        if isinstance(run, PluginRun):
            await run.end()
