"""What an exporter says of its failing ModelMesh collector: its failed reads, by reason, and the words both sources
show for a ModelMesh that broke after a good read (`modelmesh_fails_after`: the scrape source from the exporter's
text, the Prometheus source from its series).

The scrape source reads the counter only from the text of an exporter that says its ModelMesh collector failed at
its last attempt while it still serves a good read's values (`exposition.modelmesh_failed_reads`): the series is no
signal the adapter scales by, so the fast reader (`exporter_text.WANTED`) does not read it at every scrape of every
pod. The exporter publishes no "last reason"; its counters by reason (`exporter.collectors.health`) name the one an
outage has, and the others any earlier ones had.
"""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.kube.timestamps import rfc3339
from exporter import names


def failed_reads_said(counts: Iterable[tuple[str, float]]) -> str:
    """An exporter's failed ModelMesh reads by reason, for a person: `http: 12 failed reads`, `connect: 3, http:
    12 failed reads`; or what is missing, from an exporter that does not count them by reason."""
    said = [f"{reason}: {count:,.0f}" for reason, count in counts]
    if not said:
        return f"no {names.SCRAPE_ERRORS_TOTAL}{{collector=\"{names.COLLECTOR_MODELMESH}\"}} to say why"
    return f"{', '.join(said)} failed reads"


def modelmesh_fails_after(last_read: float, failures: str) -> str:
    """An exporter whose ModelMesh collector fails after a good read at `last_read`, whose values it still serves
    (`failures`: its failed reads by reason, `failed_reads_said`): the same words whichever source reads it."""
    return (f"its exporter cannot read ModelMesh since its last good read at {rfc3339(last_read)} ({failures}; "
            f"{names.COLLECTOR_SUCCESS}{{collector=\"{names.COLLECTOR_MODELMESH}\"}} 0), so it serves that read's "
            "values and the pod turns stale: check the pod's ModelMesh container (restarting, overloaded, its metrics "
            "port) and the exporter's log, which says why ('modelmesh collector failed (REASON)')")
