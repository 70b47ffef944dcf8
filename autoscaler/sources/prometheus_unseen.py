"""Runtimes Prometheus has no series for while it has them for other runtimes' pods, as `PrometheusSource` says
it: named once in the log after `UNSEEN_WARN_AFTER_S`, an `unseen` problem in /debug meanwhile, and a line when
series come again.

The usual cause is the runtime's namespace left out of what Prometheus scrapes (a PodMonitor's
namespaceSelector, a scrape config's relabelling, a NetworkPolicy on the exporter's port), and nothing else would
say so: the runtime's values are held, then 503, as for any pod without data. Not an error: a new pod is not
scraped yet either. Apart from the source, whose job is joining answers to the inventory, so that what is kept
of such a runtime, and when it is forgotten, is read in one place. A runtime whose exporters Prometheus scrapes but
which say they never read ModelMesh is not unseen: `prometheus_modelmesh_failing` names each pod and why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.sources.base import RuntimeInventory, SourceProblem
from autoscaler.sources.prometheus_promql import PodRef
from exporter import names

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

REASON_UNSEEN: Final = "unseen"
"""A `SourceProblem`'s reason while none of the runtime's Ready pods has series and other runtimes' pods have them
(not an error: a new pod not scraped yet, or a namespace Prometheus does not scrape)."""

UNSEEN_WARN_AFTER_S = 120.0
"""How long all of a runtime's Ready pods may lack series before the log names it: longer than Prometheus takes
to discover and scrape a new pod (its service discovery, plus a 30 s scrape interval)."""


class UnseenRuntimes:
    """The runtimes none of whose Ready pods has series, since when (`note`), for the log and /debug (`problem`);
    Prometheus at `url` is named in what they say."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._since: dict[RuntimeKey, float] = {}  # runtimes none of whose Ready pods have series, since
        self._warned: set[RuntimeKey] = set()

    def note(self, inventory: Mapping[RuntimeKey, RuntimeInventory], seen: set[PodRef], now: float) -> None:
        """Name a runtime none of whose Ready pods has had series for UNSEEN_WARN_AFTER_S, once, while Prometheus
        answers for others (`seen`: the inventory's pods it has series for), and say when it has them again."""
        for key, runtime in inventory.items():
            ready = [pod.name for pod in runtime.pods if pod.ready]
            if not ready or any((key.namespace, name) in seen for name in ready):
                self._since.pop(key, None)
                if key in self._warned:
                    self._warned.discard(key)
                    log.info("Prometheus has series for runtime %s/%s again", key.namespace, key.deployment)
                continue
            since = self._since.setdefault(key, now)
            if now - since >= UNSEEN_WARN_AFTER_S and key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "Prometheus at %s has had no %s series for runtime %s/%s (%d Ready pods: %s) for %.0f s, while it "
                    "has them for other runtimes: is it scraping that namespace's exporters (a PodMonitor's "
                    "namespaceSelector, a scrape config's relabelling)? Its values are unknown until it does",
                    self._url, names.LAST_SUCCESS_TIMESTAMP, key.namespace, key.deployment, len(ready),
                    few(ready, 3), now - since)

    def problem(self, key: RuntimeKey) -> SourceProblem | None:
        """The runtime's `unseen` problem for /debug, from the first refresh without its series; None while it has
        them (or has no Ready pod)."""
        since = self._since.get(key)
        if since is None:
            return None
        return SourceProblem(
            REASON_UNSEEN, f"Prometheus at {self._url} has no {names.LAST_SUCCESS_TIMESTAMP} series for any Ready "
            f"pod of {key} while it has them for other runtimes' pods: a new pod not scraped yet, or is Prometheus "
            f"not scraping namespace {key.namespace} (a PodMonitor's namespaceSelector, a scrape config's "
            "relabelling, a NetworkPolicy on port 9187)?", since)

    def runtimes(self) -> set[RuntimeKey]:
        """The runtimes anything is kept of: the source forgets those discovery no longer lists."""
        return self._since.keys() | self._warned

    def forget(self, key: RuntimeKey) -> None:
        """Drop what is kept of runtime `key` (gone, or created again: a new runtime gets its own grace)."""
        self._since.pop(key, None)
        self._warned.discard(key)
