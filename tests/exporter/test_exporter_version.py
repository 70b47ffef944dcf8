"""`modelmesh-exporter --version`, to check a sidecar against its adapter.

operations.md (Upgrading) says to keep the adapter and the sidecars on the same version; `modelmesh-autoscaler
--version` says the adapter's, but `modelmesh-exporter --version` printed the 14-line usage and "unrecognized
arguments: --version", exit status 2."""

from __future__ import annotations

import subprocess
import sys

from autoscaler import __version__
from tests.exporter.test_exporter_process import exporter_command


def test_the_exporter_says_its_version_as_the_adapter_does() -> None:
    done = subprocess.run([*exporter_command(), "--version"], capture_output=True, text=True, timeout=60)
    adapter = subprocess.run([sys.executable, "-m", "autoscaler.cli", "--version"], capture_output=True, text=True,
                             timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"modelmesh-exporter {__version__}\n"
    assert adapter.stdout == f"modelmesh-autoscaler {__version__}\n"
