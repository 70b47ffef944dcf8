"""The scrape source's log lines: a pod's exporter failing (once, when its streak starts) and recovering.

One pod at a time, a line each: `scrape of NS/DEPLOYMENT/POD failed (timeout): URL: ...`. But pods fail
together: a lost node or a NetworkPolicy that drops port 9187 fails hundreds in one refresh, and an adapter
whose own core is starved times out thousands; a line per pod is then 10,000 lines for one event. So what one
refresh has to say is kept until its scrapes are done (`flush`), and when it is more than `NAMED` pods, it
is one line per failure reason (how many pods, the first ten named, one pod's detail) and one for the
recoveries. `modelmesh_autoscaler_source_errors_total` counts every failure by reason.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from autoscaler.log_lists import NAMED, few

log = logging.getLogger("autoscaler.sources.scrape")


class ScrapeNews:
    """One refresh's failed (a streak starts) and recovered pods, logged together by `flush`."""

    def __init__(self) -> None:
        self._failed: list[tuple[str, str, str]] = []  # pod, reason, detail
        self._recovered: list[str] = []

    def failed(self, pod: str, reason: str, detail: str) -> None:
        self._failed.append((pod, reason, detail))

    def recovered(self, pod: str) -> None:
        self._recovered.append(pod)

    def flush(self) -> None:
        failed, recovered = self._failed, self._recovered
        self._failed, self._recovered = [], []
        if len(failed) + len(recovered) <= NAMED:
            for pod, reason, detail in failed:
                log.warning("scrape of %s failed (%s): %s; holding its last good sample, retrying with backoff",
                            pod, reason, detail)
            for pod in recovered:
                log.info("scrape of %s recovered", pod)
            return
        by_reason: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for pod, reason, detail in failed:
            by_reason[reason].append((pod, detail))
        for reason, pods in by_reason.items():
            log.warning("scrapes of %d pods failed (%s): %s (e.g. %s: %s); holding their last good samples, "
                        "retrying with backoff", len(pods), reason, few([pod for pod, _ in pods]), *pods[0])
        if recovered:
            log.info("scrapes of %d pods recovered: %s", len(recovered), few(recovered))
