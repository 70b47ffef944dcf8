"""With `--gpu-source dcgm`, no DCGM GPU series naming any pod Prometheus has series for, as `PrometheusSource`
says it: once in the log after `UNSEEN_WARN_AFTER_S`, and a line when some pod has one again.

dcgm-exporter without `--kubernetes` names no pod (scraped honoring its labels its series have none; not
honoring them, the DCGM exporter's own), and nothing else would say why every pod's GPU busy is unknown. Apart
from the source, whose job is joining answers to the inventory, so that what is kept for this line is read in
one place (as `prometheus_unseen` keeps the runtimes Prometheus has no series for).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from autoscaler.log_lists import few
from autoscaler.sources.prometheus_promql import DCGM_GR_ENGINE_ACTIVE, PodRef
from autoscaler.sources.prometheus_unseen import UNSEEN_WARN_AFTER_S
from exporter import names

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name


class DcgmUnmatched:
    """Since when no pod Prometheus at `url` has series for has a DCGM GPU series naming it by the labels
    `dcgm_labels` (namespace, pod), and whether the log said so."""

    def __init__(self, url: str, dcgm_labels: tuple[str, str]) -> None:
        self._url = url
        self._dcgm_labels = dcgm_labels
        self._since: float | None = None  # since when no seen pod has a DCGM GPU series
        self._warned = False

    def note(self, gpu: Mapping[PodRef, str], seen: set[PodRef], now: float) -> None:
        """Say once when for UNSEEN_WARN_AFTER_S no pod of `seen` (those Prometheus has series for) is named by a
        DCGM series of `gpu` (this refresh's GPU busy answer); say again, at info, when some pod is."""
        if not seen or any(ref in gpu for ref in seen):
            self._since = None
            if self._warned:
                self._warned = False
                log.info("Prometheus has DCGM GPU series for runtime pods again")
            return
        if self._since is None:
            self._since = now
        if self._warned or now - self._since < UNSEEN_WARN_AFTER_S:
            return
        self._warned = True
        others = sorted(f"{namespace}/{pod}" for namespace, pod in gpu)
        ns_label, pod_label = self._dcgm_labels
        named = (f"they name {len(others)} other pods ({few(others, 3)}"
                 "): the DCGM exporter's own, where Prometheus does not honor its labels?" if others
                 else f"none has {ns_label} and {pod_label} labels (or there are none)")
        log.warning(
            "--gpu-source dcgm: for %.0f s none of the %d pods Prometheus at %s has series for has a %s (or, MIG, "
            "%s) series naming it in %s/%s; %s. GPU busy is unknown for every pod. Run dcgm-exporter with "
            "--kubernetes (DCGM_EXPORTER_KUBERNETES=true) so that it labels each GPU with the pod using it; where "
            "Prometheus does not honor its labels, set --dcgm-pod-label exported_pod --dcgm-namespace-label "
            "exported_namespace", now - self._since, len(seen), self._url, names.DCGM_GPU_UTIL,
            DCGM_GR_ENGINE_ACTIVE, ns_label, pod_label, named)
