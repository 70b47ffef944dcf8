"""Ctrl-C while a command starts is one line and status 130 (each `main` takes SIGINT over first thing); what Python
loads before `main` runs is outside that handling, and a Ctrl-C there was a traceback. A clean-clone CI run of the
demo's Ctrl-C test (tests/e2e/test_demo.py, at 0.4 of its start-up) read `File "autoscaler/cli.py", line 6 ... from
typing import TYPE_CHECKING ... KeyboardInterrupt`: `typing` was the one module the adapter's command loaded before
its `main`, a few milliseconds a start on a cold interpreter. Here, what each command's module loads when imported
(as the console script and `python -m` do before calling `main`): built-in modules only, beside its own package."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LOADED = """
import json, sys
before = set(sys.modules)
import {module}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize(("module", "package"), [("autoscaler.cli", "autoscaler"), ("exporter.cli", "exporter")])
def test_a_command_loads_only_built_in_modules_before_its_ctrl_c_handling(module: str, package: str) -> None:
    result = subprocess.run([sys.executable, "-c", LOADED.format(module=module)], capture_output=True, text=True,
                            timeout=60, check=True)
    loaded = json.loads(result.stdout)
    assert module in loaded
    outside = [name for name in loaded if name not in sys.builtin_module_names and name.split(".")[0] != package]
    assert outside == [], f"{module} loads {outside} before its main takes Ctrl-C over"
