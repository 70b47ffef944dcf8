"""The open-file limit raised to its hard limit as a process starts, as Go programs do (Go 1.19 and later).

A Pod spec sets no file limit; a container gets the runtime's, and where that is a soft 1,024 under a higher hard
limit (some containerd 2 installations) a process runs out of files while the kernel would allow more. The soft
limit is the process's own to raise up to the hard one, so the exporter and `serve` raise it, and say so; a hard
limit itself too low is the container runtime's to change, and the log names both numbers. Each caller says why
it needs files (`holds`) and what happens at the limit (`at_the_limit`), in words for its own operators.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_file_limit(holds: str, at_the_limit: str, logger: logging.Logger = log) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one where it is lower; the soft limit from then on. Processes
    started after this inherit it. Said at INFO once where it was raised (`holds`: what takes a file per client),
    at WARNING where it could not be (`at_the_limit`: what then fails); nothing where it was already there."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as error:  # a hard limit over the kernel's nr_open, a sandbox refusing
        logger.warning("open-file limit %d could not be raised to the hard limit %d (%s): %s, %s", soft, hard, error,
                       holds, at_the_limit)
        return soft
    logger.info("open-file limit raised from %d to %d (the hard limit): %s", soft, hard, holds)
    return hard
