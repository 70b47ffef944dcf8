"""What an exporter says of its failing ModelMesh collector: its failed reads, by reason, and the words both sources
show for it (the scrape source from the exporter's text, the Prometheus source from its series): for a ModelMesh
that broke after a good read (`modelmesh_fails_after`), and for one whose exporter never read it, or not since it
last read it (`cannot_read_modelmesh`: a wrong --modelmesh-url, a CA that does not sign ModelMesh's certificate).

The scrape source reads the counter only from the text of an exporter that says its ModelMesh collector failed at
its last attempt while it still serves a good read's values (`exposition.modelmesh_failed_reads`): the series is no
signal the adapter scales by, so the fast reader (`exporter_text.WANTED`) does not read it at every scrape of every
pod. The exporter publishes no "last reason"; its counters by reason (`exporter.collectors.health`) name the one an
outage has, and the others any earlier ones had.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from autoscaler.kube.timestamps import rfc3339
from exporter import names

MODELMESH_COLLECTOR: Final = f'{{collector="{names.COLLECTOR_MODELMESH}"}}'
"""The label set of the exporter's ModelMesh collector's series, as the words name them."""

NEVER_READ: Final = "no good read since it started"
"""`cannot_read_modelmesh`'s `since` for an exporter with no ModelMesh success time: it never read ModelMesh."""


def failed_reads_said(counts: Iterable[tuple[str, float]]) -> str:
    """An exporter's failed ModelMesh reads by reason, for a person: `http: 12 failed reads`, `connect: 3, http:
    12 failed reads`; or what is missing, from an exporter that does not count them by reason. A reason at 0 is
    none: the exporter publishes each from its start, so that a rate over them sees the first failure."""
    said = [f"{reason}: {count:,.0f}" for reason, count in counts if count]
    if not said:
        return f"no {names.SCRAPE_ERRORS_TOTAL}{MODELMESH_COLLECTOR} to say why"
    return f"{', '.join(said)} failed reads"


def modelmesh_fails_after(last_read: float, failures: str) -> str:
    """An exporter whose ModelMesh collector fails after a good read at `last_read`, whose values it still serves
    (`failures`: its failed reads by reason, `failed_reads_said`): the same words whichever source reads it."""
    return (f"its exporter cannot read ModelMesh since its last good read at {rfc3339(last_read)} ({failures}; "
            f"{names.COLLECTOR_SUCCESS}{MODELMESH_COLLECTOR} 0), so it serves that read's "
            "values and the pod turns stale: check the pod's ModelMesh container (restarting, overloaded, its metrics "
            "port) and the exporter's log, which says why ('modelmesh collector failed (REASON)')")


def cannot_read_modelmesh(since: str) -> str:
    """An exporter whose ModelMesh collector fails and that serves no load signals (`since`: `NEVER_READ`, or since
    when), with what to check: the same words whichever source reads it."""
    return (f"its exporter cannot read ModelMesh ({names.COLLECTOR_SUCCESS}{MODELMESH_COLLECTOR} 0, {since}), so "
            "it publishes no load signals and the pod's are held: check the exporter's --modelmesh-url and, for an "
            "https URL, that the CA in its --modelmesh-ca-file signs ModelMesh's certificate; the exporter's log says "
            "why ('modelmesh collector failed (REASON)')")
