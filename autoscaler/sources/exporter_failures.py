"""What an exporter says of its failing ModelMesh collector: its failed reads, by reason.

Read only from the text of an exporter that says its ModelMesh collector failed at its last attempt while it still
serves a good read's values (`ExporterReading.modelmesh_failures`): the series is no signal the adapter scales by,
so the fast reader (`exporter_text.WANTED`) does not read it at every scrape of every pod. The exporter publishes
no "last reason"; its counters by reason (`exporter.collectors.health`) name the one an outage has, and the
others any earlier ones had.
"""

from __future__ import annotations

import re
from typing import Final

from exporter import names

_FAILURES: Final = re.compile(
    rf'^{re.escape(names.SCRAPE_ERRORS_TOTAL)}\{{collector="{names.COLLECTOR_MODELMESH}",reason="([a-z_]+)"\}} '
    r"([0-9][0-9.e+]*)$", re.MULTILINE)
"""A line of the counter as the exporter writes it (its labels in that order; a reason is one of its own words)."""


def modelmesh_failure_counts(text: str) -> str:
    """The exporter's failed ModelMesh reads by reason, for a person: `http: 12 failed reads`, `connect: 3, http:
    12 failed reads`; or what is missing, from an exporter that does not count them by reason."""
    counts = [f"{reason}: {float(count):,.0f}" for reason, count in _FAILURES.findall(text)]
    if not counts:
        return f"no {names.SCRAPE_ERRORS_TOTAL}{{collector=\"{names.COLLECTOR_MODELMESH}\"}} to say why"
    return f"{', '.join(counts)} failed reads"
