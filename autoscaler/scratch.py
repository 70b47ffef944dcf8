"""Scratch directories that a later start can tell are abandoned, and removes.

`serve --workers N` keeps two directories in the temporary directory while it runs: the self-signed serving
key and certificate (`--insecure-dev`, or no `--tls-cert-file`) and the workers' shared metric files. It
removes them when it stops, but a process killed with SIGKILL (the OOM killer, a failed liveness probe) runs no
clean-up, and in the shipped Deployment `/tmp` is an emptyDir that outlives the container: each such kill would
leave a private key and some megabytes of sparse metric files behind for the pod's life.

So each directory holds an owner file on which its process keeps an exclusive `flock` for as long as it lives.
The kernel drops the lock when the process ends, however it ends; at start-up `sweep_abandoned` removes every
directory of the same kind whose lock it can take. A directory of a live process (another adapter on the same
machine, as in tests) stays locked and is left alone, as is one without an owner file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

OWNER_FILE, STARTING_OWNER_FILE = ".owner", ".owner-starting"


@contextlib.contextmanager
def owned_directory(prefix: str) -> Iterator[Path]:
    """A fresh directory in the temporary directory, locked by this process until the block ends (then removed).

    The owner file is locked under another name and renamed into place, so a sweep never finds an owner file
    that is not yet locked."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    descriptor = os.open(directory / STARTING_OWNER_FILE, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        os.rename(directory / STARTING_OWNER_FILE, directory / OWNER_FILE)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        os.close(descriptor)


def sweep_abandoned(prefix: str) -> list[Path]:
    """Remove the directories named `prefix*` in the temporary directory whose owner has gone; returns them."""
    removed = []
    for directory in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        try:
            descriptor = os.open(directory / OWNER_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # not ours to judge: no owner file (or not a directory, or not readable)
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive
            owner = os.read(descriptor, 32).decode(errors="replace").strip() or "?"
            shutil.rmtree(directory, ignore_errors=True)
        finally:
            os.close(descriptor)
        log.info("removed %s, left by process %s, which ended without cleaning up", directory, owner)
        removed.append(directory)
    return removed
