"""Which build of the package runs: its version and the commit it was built from.

Every release said `0.1.0`, so neither `--version` nor any series told a sidecar of yesterday from one of
today during a rollout. The commit tells them apart: the image's build writes it into the package
(`Dockerfile`: `--build-arg REVISION=...` -> `exporter/REVISION`), a checkout run in place asks git, and
anything else says `unknown`. The adapter and the sidecar are one package and read the same answer; each
publishes it as a `*_build_info` gauge of 1 (the Prometheus convention, as `prometheus_build_info`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import subprocess
from pathlib import Path
from typing import Final

UNKNOWN: Final = "unknown"
REVISION_FILE: Final = Path(__file__).with_name("REVISION")
"""Written by the image's build (`Dockerfile`), shipped as package data; absent from a checkout (.gitignore)."""
CHECKOUT: Final = Path(__file__).resolve().parent.parent
"""Where a checkout's `.git` is, when the package runs from one (an editable install, PYTHONPATH)."""


@functools.cache
def version() -> str:
    """The installed package's version (pyproject.toml's), or `unknown` where it is not installed."""
    try:
        return importlib.metadata.version("modelmesh-autoscaler")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


@functools.cache
def revision() -> str:
    """The commit this code was built from: the image's `REVISION`, else the checkout's HEAD, else `unknown`."""
    try:
        written = REVISION_FILE.read_text().strip()
    except OSError:
        written = ""
    if written and written != UNKNOWN:
        return written
    return _checkout_head() or UNKNOWN


def _checkout_head() -> str | None:
    """HEAD's short hash where the package is a git checkout's (`.git` a folder, or a worktree's file); asked once,
    at start: git absent or failing is no answer."""
    if not (CHECKOUT / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.strip()
    return head if done.returncode == 0 and head else None


def version_line(prog: str) -> str:
    """What `--version` prints: `prog VERSION (revision REVISION)`."""
    return f"{prog} {version()} (revision {revision()})"
