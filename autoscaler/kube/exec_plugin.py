"""Runs of a kubeconfig exec plugin (client.authentication.k8s.io) that end their processes when they are ended.

`kubernetes.aio`'s `ExecProvider.run` starts the plugin and awaits its output, and a cancel (the adapter
stopping, the API client closed, the request that asked giving up) leaves the process running: a plugin waiting
on a remote CA or on a login outlived the adapter. The run here is the library's (the command, arguments and
environment as it reads them from the kubeconfig, its `KUBERNETES_EXEC_INFO` but `interactive` always false, the
same checks of the answer and the same errors), except that the plugin starts in a session of its own and a
cancelled run kills that whole process group and reaps the plugin before the cancel goes on: a plugin is often a
shell wrapper that runs the real one as its child (`sh -c 'aws eks get-token ...'`), which killing the shell alone
left running.

`PluginRun` is the one run under way for a plugin's credential, whether a token (`credentials`) or a client
certificate (`client_certificate`): a task of its own, not the request's that found the credential due, so a
request that gives up leaves the run to finish for the next, and closing the API client (`end_renewal`) ends it.
While the current credential is still valid, requests go out with it and do not wait for the run: the run starts
minutes before the expiry, and aiohttp's request timeout does not cover the wait (a hung `aws eks get-token` held a
Lease renewal with a 3 s deadline for minutes, and the Lease blamed the API server). A request with no valid
credential waits for the run at most `SLOW_RUN_S`; a run still going then is said once, naming the plugin's command,
and when it ends, how (a new credential, or the failure: "answered" after a failed run read as a credential at
last). A caller with a deadline of its own learns that its call waited on the run (`plugin_waits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kubernetes.aio.config.config_exception import ConfigException
from kubernetes.aio.config.exec_provider import ExecProvider

from autoscaler.kube.plugin_waits import waiting_for_plugin
from autoscaler.kube.raw import describe

log = logging.getLogger("autoscaler.kube")

SLOW_RUN_S: float = 30.0
"""How long a plugin run may take before it is said to be slow (once, as a WARNING), and how long a request with
no valid credential waits for it before it goes out with the last one (and is answered 401 Unauthorized, which its
caller reports): cloud token plugins answer in a second or two; one still running after this waits on something
(its network, a login) that the requests cannot. A variable, so that tests need not wait this long."""


def plugin_command(exec_config: Any) -> str:
    """The plugin's command as the kubeconfig names it (`aws`, `/usr/local/bin/kubelogin`), to say which plugin:
    never its arguments or environment, which may carry secrets (`--oidc-client-secret`, an `AWS_SECRET_ACCESS_KEY`)."""
    try:
        return str(exec_config["command"])
    except Exception:  # the library's loader refused such a kubeconfig at load: nothing runs
        return "(no command)"


async def run_exec_plugin(exec_config: Any) -> dict[str, Any]:
    """The `status` of the ExecCredential the plugin `exec_config` (a kubeconfig user's `exec`) prints;
    `ConfigException` when it fails or prints no such credential."""
    plugin = ExecProvider(exec_config)  # type: ignore[no-untyped-call]  # reads command, args, env as at load
    # Never interactive: the run has a session of its own and no controlling terminal, even where the adapter's
    # output is one (`serve` from a shell); a plugin told otherwise opened /dev/tty for a login no one could see.
    # Nor any standard input (as client-go runs a plugin that may not ask): one that read it took the keystrokes
    # of the shell `serve` ran from, or waited on them until its run was ended.
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *plugin.args, env={**plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}, stdin=asyncio.subprocess.DEVNULL,
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

    def __init__(self, renew: Callable[[], Coroutine[Any, Any, str | None]], name: str, *, command: str,
                 credential: str) -> None:
        """`renew`: one run of the plugin and what becomes of its answer; it keeps its own errors and returns why
        the run gave no new credential (None: it did). `command`: the plugin's (`plugin_command`), and
        `credential` what it renews ("token"), to say which run is slow and what a call waited on."""
        self._renew = renew
        self._name = name
        self._command = command
        self._credential = credential
        self._task: asyncio.Task[str | None] | None = None

    def start(self) -> asyncio.Task[str | None]:
        """The run under way, or a new one."""
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._renew(), name=self._name)
            slow = loop.call_later(SLOW_RUN_S, self._say_slow, self._task, time.monotonic())
            self._task.add_done_callback(lambda _task: slow.cancel())
        return self._task

    async def due(self, *, still_valid: bool) -> None:
        """The credential is due for renewal: start the run unless one is under way. While the current credential
        is `still_valid`, return at once: the request goes out with it. Otherwise wait for the run (`join`)."""
        self.start()
        if not still_valid:
            await self.join()

    @property
    def under_way(self) -> bool:
        """Whether a run has started and not ended: a request whose credential was refused waits for it (`join`)
        rather than go out with the refused one."""
        return self._task is not None and not self._task.done()

    async def join(self) -> None:
        """Wait for the run under way, if any, at most `SLOW_RUN_S`: the request then goes out with the last
        credential, as it does when the run ends without a new one or `end()` ends it. A caller cancelled meanwhile
        raises, and the run goes on for the next."""
        if self._task is not None:
            with waiting_for_plugin(self._command, self._credential):
                await asyncio.wait([self._task], timeout=SLOW_RUN_S)

    async def end(self) -> None:
        """End the run under way, if any: its plugin killed and reaped."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])

    def _say_slow(self, run: asyncio.Task[str | None], started: float) -> None:
        """Name the plugin that keeps the credential from being renewed, then say when it ends, and how."""
        if run.done():  # it ended as the timer fired
            return
        log.warning("Kubernetes credentials: the kubeconfig's exec plugin %s has not answered in %s s; the %s it "
                    "gives is not renewed meanwhile: requests go out with the last %s while it is valid (and not "
                    "refused), and otherwise wait for the plugin at most %s s each. Run the plugin by hand to see "
                    "what it waits for (its network, a login)", self._command, f"{SLOW_RUN_S:g}", self._credential,
                    self._credential, f"{SLOW_RUN_S:g}")

        def ended(finished: asyncio.Task[str | None]) -> None:
            if finished.cancelled():  # ended with the API client: nothing to wait for
                return
            took = time.monotonic() - started
            error = finished.exception()
            failure = describe(error) if error is not None else finished.result()
            if failure is None:
                log.info("Kubernetes credentials: the exec plugin %s answered after %.1f s", self._command, took)
            else:
                log.info("Kubernetes credentials: the exec plugin %s failed after %.1f s, without a new %s: %s",
                         self._command, took, self._credential, failure)

        run.add_done_callback(ended)


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
