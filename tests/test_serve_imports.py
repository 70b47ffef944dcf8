"""What `serve` loads is part of its memory: every module stays in the refresh process for its lifetime.

Two loads cost the refresh process about 45 MiB of RSS (an eighth of it at 5,000 runtimes) for code it never ran:
numpy (12 MiB), which the simulator's command-line limits pulled in through the trace reader when the parser
was built, and the `kubernetes.aio` generated API classes (34 MiB), whose modules load the pydantic models of
every object their methods name, where the adapter reads raw JSON (`autoscaler.kube.paths`). Run in a fresh
interpreter, so that what other tests imported does not count.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import autoscaler
from autoscaler.cli import build_parser
build_parser()
for module in pkgutil.walk_packages(autoscaler.__path__, "autoscaler."):
    if not module.name.startswith(("autoscaler.simulation", "autoscaler.demo")):
        importlib.import_module(module.name)
print(" ".join(sorted(name for name in sys.modules
                      if name == "numpy" or name.startswith("kubernetes.aio.client.api."))))
"""


def test_serve_loads_neither_numpy_nor_the_generated_kubernetes_api_classes() -> None:
    loaded = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True,
                            timeout=120).stdout.split()
    assert loaded == []
