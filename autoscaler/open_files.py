"""The open-file limit raised to its hard limit as `serve` starts, as Go programs do (Go 1.19 and later).

The refresh keeps one connection per exporter scraped from one refresh to the next (`sources.scrape_keepalive`):
a file descriptor per pod, 5,000 at 5,000 pods. A Pod spec sets no file limit; the container gets the
runtime's, and where that is a soft 1,024 under a higher hard limit (some containerd 2 installations) a fleet of
about 900 pods failed its scrapes with "Too many open files" while the kernel would have allowed more. The soft
limit is the process's own to raise up to the hard one, so the adapter raises it, and says so; a hard limit
itself too low is the container runtime's to change, and the log names both numbers.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one where it is lower; the soft limit from then on. Worker
    processes started after this inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as error:  # a hard limit over the kernel's nr_open, a sandbox refusing
        log.warning("open-file limit %d could not be raised to the hard limit %d (%s): the refresh keeps one "
                    "connection per exporter scraped, so a fleet of more pods than that fails its scrapes with "
                    "'Too many open files'", soft, hard, error)
        return soft
    log.info("open-file limit raised from %d to %d (the hard limit): the refresh keeps one connection per "
             "exporter scraped", soft, hard)
    return hard
