"""The open-file limit raised to its hard limit as `serve` starts (`exporter.open_files`, shared with the exporter).

The refresh keeps one connection per exporter scraped from one refresh to the next (`sources.scrape_keepalive`):
a file descriptor per pod, 5,000 at 5,000 pods. Under a container runtime's soft 1,024 below a higher hard limit
(some containerd 2 installations) a fleet of about 900 pods failed its scrapes with "Too many open files" while
the kernel would have allowed more.
"""

from __future__ import annotations

import logging

from exporter import open_files

log = logging.getLogger(__name__)


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one where it is lower; the soft limit from then on. Worker
    processes started after this inherit it."""
    return open_files.raise_open_file_limit(
        "the refresh keeps one connection per exporter scraped",
        "so a fleet of more pods than that fails its scrapes with 'Too many open files'", log)
