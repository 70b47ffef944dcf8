"""What the adapter says when the port it scrapes is ModelMesh's own metrics port, not the exporter sidecar's.

`--exporter-port 2112` (or a targets file's URL naming it) is an easy mistake: ModelMesh's `mm` container serves
`/metrics` there too, so it is no 404. Over https (ModelMesh's default) a plain-HTTP scrape has its connection
closed, which read as a missing sidecar or a NetworkPolicy; over http the body parses, holds no exporter series,
and the scrape failed as `parse` without a word of ModelMesh. Both now name the likely cause and the flag.
"""

from __future__ import annotations

import re
from typing import Final

from exporter import names

EXPORTER_PORT_WORDS: Final = ("give --exporter-port (or the targets file's URL) the port of the exporter sidecar's "
                              "--listen (EXPORTER_LISTEN; 9187 unless set)")

_MODELMESH_SERIES: Final = re.compile(
    r"^(?:# (?:HELP|TYPE) )?("
    + "|".join(re.escape(name) for name in sorted((
        names.MM_INVOKE_MODEL_MS, names.MM_QUEUE_DELAY_MS, names.MM_CACHE_MISS_MS, names.MM_LOAD_MODEL_MS,
        names.MM_LRU_AGE_S, names.MM_LRU_S, names.MM_CAPACITY_BYTES, names.MM_USED_BYTES, names.MM_MODELS_TOTAL),
        key=len, reverse=True))
    + r")(?:_bucket|_count|_sum)?[ {]", re.MULTILINE)
"""A line of one of the series ModelMesh serves and the exporter reads (`exporter/names.py`), sample or comment."""


def modelmesh_own_metrics(text: str) -> str | None:
    """Why a body without exporter series is refused, where it holds ModelMesh's own: the port is ModelMesh's;
    else None. Looked for only in a body already refused, never on a good scrape's path."""
    found = _MODELMESH_SERIES.search(text)
    if found is None:
        return None
    return (f"no modelmesh exporter metrics in the response, but ModelMesh's own metrics ({found[1]}): this is "
            f"ModelMesh's own metrics port (2112 in the mm container), not the exporter's; {EXPORTER_PORT_WORDS}")


def plain_to_tls_port(port: int | str) -> str:
    """A connection closed at once after a plain-HTTP request, from a pod never scraped fine: a TLS port spoken
    to in plain HTTP; ModelMesh's own port (HTTPS by default) is one."""
    return (f"port {port} may be a TLS port spoken to in plain HTTP: ModelMesh's own metrics port (2112, HTTPS "
            f"unless ModelMesh is told otherwise) closes it so, and then {EXPORTER_PORT_WORDS}; or")
