"""The warning for pods that `--exporter-scheme http` or `https` scrapes against what their exporter port's name says.

A forced scheme is for sidecars that declare no port. Left on a fleet whose pods do declare it, it scrapes the pods
of the other kind over the wrong scheme: `https` given while sidecars move to TLS runtime by runtime fails every
runtime not moved yet (503 after `max_staleness_s`). The scrape log says only that a scrape
failed (reason `tls` or `connect`); this says why, and what to write instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from autoscaler.log_lists import few
from autoscaler.sources.kube_objects import PodRecord, scheme_of

log = logging.getLogger(__name__)


class ForcedSchemeWarning:
    """Says, once for each pod, that a forced `--exporter-scheme` scrapes it over the scheme its port's name does
    not say; one line for all the pods found at once (a fleet at the first list), naming the first few."""

    def __init__(self, exporter_port: int, scheme: str) -> None:
        self._exporter_port = exporter_port
        self._scheme = scheme
        self._said: set[tuple[str, str]] = set()

    def check(self, pods: Iterable[PodRecord]) -> None:
        """Warn about the pods not warned about yet; forget the pods gone, so a pod made again is said again."""
        if self._scheme == "auto":
            return
        against = {(pod.namespace, pod.name) for pod in pods if self._against(pod)}
        new = sorted(against - self._said)
        self._said = against
        if not new:
            return
        said = "https (https or https-*)" if self._scheme == "http" else "http (not https or https-*)"
        log.warning("--exporter-scheme %s scrapes every pod over %s, but %d pod(s) declare the exporter port %d "
                    "under a name that says %s: %s; their scrapes fail. Leave --exporter-scheme at auto (the "
                    "default: remove the flag, or AUTOSCALER_EXPORTER_SCHEME) to scrape each pod over the scheme its "
                    "port's name says, https-exporter over https and exporter over http", self._scheme, self._scheme,
                    len(new), self._exporter_port, said, few([f"{namespace}/{name}" for namespace, name in new]))

    def _against(self, pod: PodRecord) -> bool:
        declared = pod.declared_ports is not None and self._exporter_port in pod.declared_ports
        return declared and scheme_of(pod, self._exporter_port, "auto") != self._scheme
