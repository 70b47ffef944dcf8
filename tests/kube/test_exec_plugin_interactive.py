"""A plugin run while the adapter runs is told it cannot ask anyone (`spec.interactive: false`), even where the
adapter's output is a terminal: the run starts in a session of its own, with no controlling terminal, so a plugin
told it could ask (kubelogin, an OIDC device flow) opened /dev/tty and failed, or waited on a prompt no one saw."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from kubernetes.aio.config.kube_config import ConfigNode

from autoscaler.kube.exec_plugin import run_exec_plugin


class _Terminal(io.StringIO):
    """Standard output as in `serve` started from a shell."""

    def isatty(self) -> bool:
        return True


async def test_a_plugin_run_is_told_it_cannot_ask_even_from_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(textwrap.dedent("""
        import json, os
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {"token": json.dumps(info["spec"])}}))
    """))
    exec_config = ConfigNode("exec", {  # type: ignore[no-untyped-call]
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)],
        "interactiveMode": "IfAvailable"})
    monkeypatch.setattr(sys, "stdout", _Terminal())

    status = await run_exec_plugin(exec_config)

    assert json.loads(status["token"]) == {"interactive": False}


async def test_a_plugin_run_reads_nothing_from_the_adapters_standard_input(tmp_path: Path) -> None:
    """As client-go runs a plugin that may not ask: no standard input. With the adapter's, a plugin that read it
    took the keystrokes of the shell `serve` ran from (or waited on them until its run was ended)."""
    script = tmp_path / "plugin.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {"token": "read:" + sys.stdin.read()}}))
    """))
    exec_config = ConfigNode("exec", {  # type: ignore[no-untyped-call]
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)],
        "interactiveMode": "Never"})
    typed, keyboard = os.pipe()  # the adapter's standard input: what someone types at its shell
    os.write(keyboard, b"kubectl get pods\n")
    os.close(keyboard)
    saved = os.dup(0)
    os.dup2(typed, 0)
    try:
        status = await run_exec_plugin(exec_config)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(typed)

    assert status["token"] == "read:"
