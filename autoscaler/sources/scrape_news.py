"""The scrape source's log lines: a pod's exporter failing (once, when its streak starts) and recovering.

One pod at a time, a line each: `scrape of NS/DEPLOYMENT/POD failed (timeout): URL: ...`. But pods fail
together: a lost node or a NetworkPolicy that drops port 9187 fails hundreds in one refresh, and an adapter
whose own core is starved times out thousands; a line per pod is then 10,000 lines for one event. So what one
refresh has to say is kept until its scrapes are done (`flush`), and when it is more than `NAMED` pods, it
is one line per failure reason (how many pods, the first ten named, one pod's detail) and one for the
recoveries. `modelmesh_autoscaler_source_errors_total` counts every failure by reason. Exporter clocks found
off the adapter's (a node with broken time sync: every pod on it at once) are said the same way.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from autoscaler.log_lists import NAMED, few
from autoscaler.source_problems import REASON_GARBAGE
from exporter.names import REASON_TIMEOUT

log = logging.getLogger("autoscaler.sources.scrape")


class ScrapeNews:
    """One refresh's failed (a streak starts) and recovered pods, logged together by `flush`."""

    def __init__(self) -> None:
        self._failed: list[tuple[str, str, str]] = []  # pod, reason, detail
        self._recovered: list[str] = []
        self._clock_off: list[tuple[str, float]] = []  # pod, how far its exporter's clock is ahead of ours
        self._clock_ok: list[str] = []

    def clock_off(self, pod: str, offset_s: float) -> None:
        """The pod's exporter clock is found off ours by `offset_s` (or moved by a second or more)."""
        self._clock_off.append((pod, offset_s))

    def clock_ok(self, pod: str) -> None:
        """The pod's exporter clock agrees with ours again."""
        self._clock_ok.append(pod)

    def failed(self, pod: str, reason: str, detail: str) -> None:
        self._failed.append((pod, reason, detail))

    def recovered(self, pod: str) -> None:
        self._recovered.append(pod)

    def flush(self) -> None:
        self._flush_clocks()
        failed, recovered = self._failed, self._recovered
        self._failed, self._recovered = [], []
        if len(failed) + len(recovered) <= NAMED:
            for pod, reason, detail in failed:
                log.warning("scrape of %s failed (%s): %s; holding its last good sample, %s", pod, reason, detail,
                            _next_try(reason))
            for pod in recovered:
                log.info("scrape of %s recovered", pod)
            return
        by_reason: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for pod, reason, detail in failed:
            by_reason[reason].append((pod, detail))
        for reason, pods in by_reason.items():
            log.warning("scrapes of %d pods failed (%s): %s (e.g. %s: %s); holding their last good samples, %s",
                        len(pods), reason, few([pod for pod, _ in pods]), *pods[0], _next_try(reason))
        if recovered:
            log.info("scrapes of %d pods recovered: %s", len(recovered), few(recovered))

    def _flush_clocks(self) -> None:
        """A node whose clock is off (or drifts) puts every pod on it here at once: one line per pod for a few,
        else one line for all of them, with the range of the offsets."""
        off, ok = self._clock_off, self._clock_ok
        self._clock_off, self._clock_ok = [], []
        if len(off) <= NAMED:
            for pod, offset in off:
                log.warning("%s: the exporter's clock is %.1f s %s the adapter's (modelmesh_exporter_time_seconds); "
                            "its collection times are read on its own clock. Check the node's time sync.",
                            pod, abs(offset), "ahead of" if offset > 0 else "behind")
        else:
            offsets = [offset for _, offset in off]
            log.warning("the exporters of %d pods have clocks %+.1f to %+.1f s off the adapter's "
                        "(modelmesh_exporter_time_seconds): %s; their collection times are read on their own clocks. "
                        "Check those nodes' time sync.", len(off), min(offsets), max(offsets), few([p for p, _ in off]))
        if len(ok) <= NAMED:
            for pod in ok:
                log.info("%s: the exporter's clock agrees with the adapter's again", pod)
        else:
            log.info("the exporters of %d pods have clocks that agree with the adapter's again: %s", len(ok), few(ok))


def _next_try(reason: str) -> str:
    """When the pod is read again: at every refresh for an answer without a usable reading (the exporter
    answers, so nothing backs off); with backoff after a timeout; after any other failure at the next refresh,
    unless it took a second or more (`scrape_retry.fails_cheaply`: not known when a spell's line is written)."""
    if reason == REASON_GARBAGE:
        return "reading it again at every refresh"
    if reason == REASON_TIMEOUT:
        return "retrying with backoff"
    return "retrying at the next refresh (with backoff where it fails slowly)"
