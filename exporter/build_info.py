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
    """HEAD's commit (its first 12 hex digits) where the package is a git checkout's, read from git's files (a
    worktree's `.git` file naming its folder, a branch's ref, or packed-refs), or None. Read, not asked of `git`:
    a process started at every start-up outlived a Ctrl-C that ended the exporter during it."""
    git = CHECKOUT / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = (CHECKOUT / git.read_text().partition(":")[2].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return _commit(head)  # a detached HEAD
        ref = head.removeprefix("ref: ")
        common = git / "commondir"  # a worktree's refs live in the main checkout's folder
        shared = (git / common.read_text().strip()).resolve() if common.is_file() else git
        for folder in (git, shared):
            if (folder / ref).is_file():
                return _commit((folder / ref).read_text())
        for line in (shared / "packed-refs").read_text().splitlines():
            if line.endswith(f" {ref}"):
                return _commit(line.partition(" ")[0])
    except (OSError, ValueError):
        return None
    return None


def _commit(text: str) -> str | None:
    """A commit's short form, or None where `text` is not a commit's hash."""
    text = text.strip()
    return text[:12] if len(text) >= 40 and all(c in "0123456789abcdef" for c in text) else None


def version_line(prog: str) -> str:
    """What `--version` prints: `prog VERSION (revision REVISION)`."""
    return f"{prog} {version()} (revision {revision()})"
