"""One run of a kubeconfig exec plugin (client.authentication.k8s.io) that ends its process when it is cancelled.

`kubernetes.aio`'s `ExecProvider.run` starts the plugin and awaits its output, and a cancel (the adapter
stopping, the API client closed) leaves the process running: a plugin waiting on a remote CA or on a login
outlived the adapter. The run here is the library's (the command, arguments and environment as it reads them from
the kubeconfig, the same `KUBERNETES_EXEC_INFO`, the same checks of the answer and the same errors), except that a
cancelled run kills the plugin and reaps it before the cancel goes on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from kubernetes.aio.config.config_exception import ConfigException
from kubernetes.aio.config.exec_provider import ExecProvider


async def run_exec_plugin(exec_config: Any) -> dict[str, Any]:
    """The `status` of the ExecCredential the plugin `exec_config` (a kubeconfig user's `exec`) prints;
    `ConfigException` when it fails or prints no such credential."""
    plugin = ExecProvider(exec_config)  # type: ignore[no-untyped-call]  # reads command, args, env as at load
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": sys.stdout.isatty()}}
    process = await asyncio.create_subprocess_exec(
        *plugin.args, env={**plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}, stdin=None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await process.communicate()
    except BaseException:  # cancelled: nobody waits for its answer any more
        if process.returncode is None:
            process.kill()
            await process.wait()  # reaped, not a zombie
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
