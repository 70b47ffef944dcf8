"""Bytes given to OpenSSL as files without writing to any filesystem.

Why: `ssl` loads a certificate and key only from paths, and a reloader must load the bytes it read once (the
kubelet may swap the Secret's files between two reads). The exporter sidecar runs with a read-only root
filesystem and, in the shipped patch, no writable volume, so a temporary directory is not there to be had:
renewed certificates failed to load every 10 s and the old one was served until it expired. An anonymous
in-memory file (`memfd_create`) needs no filesystem at all; `/proc/self/fd/N` names it for OpenSSL. Where there
is no memfd (not Linux, or /proc not mounted) a private temporary directory is used, as before.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _memfd_paths(contents: tuple[bytes, ...], stack: contextlib.ExitStack) -> list[Path] | None:
    """Paths of in-memory files holding `contents`, open until `stack` closes; None where there are none."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is None or not Path("/proc/self/fd").is_dir():
        return None
    paths = []
    for index, data in enumerate(contents):
        try:
            fd = memfd_create(f"mm-autoscaler-pem-{index}", os.MFD_CLOEXEC)
        except OSError:
            return None
        stack.callback(os.close, fd)
        _write_all(fd, data)
        paths.append(Path(f"/proc/self/fd/{fd}"))
    # OpenSSL opens the path anew: a process made non-dumpable cannot open its own /proc/self/fd entries.
    return paths if all(os.access(path, os.R_OK) for path in paths) else None


def _write_all(fd: int, data: bytes) -> None:
    """`os.write` may write less than it is given."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextlib.contextmanager
def files_holding(*contents: bytes) -> Iterator[list[Path]]:
    """One readable path per item of `contents`, for as long as the block runs; nothing is left behind."""
    with contextlib.ExitStack() as stack:
        paths = _memfd_paths(contents, stack)
        if paths is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mm-autoscaler-pem-")))
            paths = []
            for index, data in enumerate(contents):
                path = directory / f"{index}.pem"
                path.write_bytes(data)
                paths.append(path)
        yield paths
