"""Which pod an exporter runs in, as it says so in `modelmesh_exporter_pod_info` and as the adapter reads it back.

The adapter scrapes each runtime pod's sidecar by the pod's IP. An IP is given to another pod once its pod is gone,
and discovery can lag (a lost node's pod still listed Ready; a watch behind): the adapter then reads another pod's
exporter, and counted its load as the pod it scraped for. Only the exporter knows which pod it runs in; it is told by
the downward API (`metadata.name`, `metadata.namespace`, `metadata.uid`). One definition for both ends: the
exporter's settings and collector, and the adapter's check (`autoscaler.sources.answered_pod`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from exporter import names

POD_INFO_HELP: Final = "The pod this exporter runs in (downward API)."
"""`names.POD_INFO`'s HELP text: the exporter writes it, and the adapter's reader knows the family by it
(`autoscaler.sources.exporter_text`), to read the pod's line apart without checking its comments again."""


class PodIdentity(NamedTuple):
    """A pod as the downward API names it; a field not given is None (a sidecar without that variable). A tuple:
    the adapter makes one per scrape, and a frozen dataclass's construction cost a tenth of reading the text."""

    namespace: str | None = None
    name: str | None = None
    uid: str | None = None

    def labels(self) -> dict[str, str]:
        """The `POD_INFO` labels this pod is known by; empty when nothing is (no series is published then)."""
        values = (self.namespace, self.name, self.uid)
        return {label: value for label, value in zip(names.POD_LABELS, values, strict=True) if value}

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> PodIdentity:
        """The pod a `POD_INFO` sample names (an empty label value is no value)."""
        return cls(labels.get("namespace") or None, labels.get("pod") or None, labels.get("uid") or None)

    def __str__(self) -> str:
        """`namespace/name (uid ...)`, what an operator looks the pod up by; `?` for a part not given."""
        said = f"{self.namespace or '?'}/{self.name or '?'}"
        return f"{said} (uid {self.uid})" if self.uid else said
